// The DeepSeek-V4.1 codecs of the FP4 / MXFP8 KV records and the MXFP4 indexer cache (spec v41_fp4.md §2, §3),
// shared by the CPU reference and the CUDA backend (determinism contract, way 3: one fixed sequence of IEEE fp32
// operations and integer bit manipulations, compiled for both). Plain C++17, no libm.
//
// Element codec: e2m1 nibble = 8*sign + index, magnitudes {0, 0.5, 1, 1.5, 2, 3, 4, 6}; |x| > 6 (and inf) saturate
// to 6 (PTX cvt.rn.satfinite). What producers disagree on is a named option, never a silent default:
//   Tie       rne (PTX cvt.rn, the REF, FlashMLA's test, sglang's codec: a midpoint goes to the even index, i.e. the
//             e2m1 value whose mantissa bit is 0) | half_down (DeepGEMM deep_gemm/utils/math.py counts `ax >
//             boundary`: a midpoint goes to the smaller magnitude)
//   ZeroSign  keep (FlashMLA's test, PTX cvt: a negative value that rounds to 0 gives nibble 0x8, -0.0 too) | clear
//             (DeepGEMM: 0x0) | lt_zero (FlashMLA #18's 352-byte test: the sign is x < 0, so -0.0 gives 0x0 and a
//             negative value that rounds to 0 gives 0x8)
//   NanCode   zero (FlashMLA's test: NaN codes 0) | max (nibble 7 with the NaN's sign)
// Block quantizers (one row of n elements, block-major; x are fp32 values, usually bf16-valued):
//   MXFP8  block 32, e4m3 codes, ue8m0 scale byte    (FlashMLA ModelType::V41 rows, 528 B per 512 dims)
//          Mx8Rule ref:      e = ceil(log2(fl32(max(amax, 1e-4) * fl32(1/448))))   (REF, vLLM: the floor on amax)
//                  flashmla: e = ceil(log2(max(fl32(amax / 448), 1e-4)))          (FlashMLA tests/quant.py: on the scale)
//          codes e4m3(clamp(x * 2^-e, +-448)), byte clamp(e + 127, 0, byte_max) (byte_max 254 on gfx950)
//   NVFP4  block 16, e2m1 codes, e4m3 scale byte     (ModelType::V41_FP4, 288 B per 512 dims)
//          Nv4Rule ref:      s = e4m3(fl32(max(amax, 6*2^-9) / 6)) (no upper clamp)
//                  vllm:     s = e4m3(clamp(fl32(amax * fl32(1/6)), 2^-9, 448))
//                  flashmla: s = e4m3(clamp(fl32(amax / 6), 2^-9, 448)); NaN or inf in the block: scale NaN (0x7F)
//                  flashmla352: t = max(fl32(amax / 6), 2^-9), b = e4m3(t) (no saturation: t > 464 gives NaN), then
//                            b + 1 when decode(b) < t and b < 0x7E (the scale rounded up, never past 448): vLLM
//                            FlashMLA #18 tests/quant.py, the 352-byte record
//                  vllm352:  the same scale from an amax that skips NaN elements (fmaxf) and a saturating cast
//                            (__nv_fp8_e4m3); codes x * fl32(1/S): vLLM nvfp4_ds_mla_cache_kernels.cu
//                  flashinfer384: t = fl32(amax / 6) from an amax that skips NaN, no floor, b = e4m3 saturating; codes
//                            x * inv with inv = 0 for S = 0 else fl32(1/S): FlashInfer's sparse-MLA nvfp4 writer (sglang
//                            SM120, the 384-byte record)
//                  lil432:   flashinfer384 with t = fl32(amax * R6): local-inference-lab vLLM's nvfp4 MLA writer; R6 =
//                            rcp.approx.ftz(6) and its code reciprocals rcp.approx(S): measured on an H200 (sm_90,
//                            2026-12-05, scripts/examples/h200_fp4_probes.cu) equal to fl32(1/6) and fl32(1/S) for 6 and
//                            every positive finite e4m3 S, so the rule is exact there
//          codes e2m1(clamp(fl32(x / S), +-6)) with S the decoded e4m3 scale (IEEE division: PTX div_rn), or
//          e2m1(fl32(x * inv)) where the rule says so
//   MXFP4  block 32, e2m1 codes, ue8m0 scale byte    (the V4.1 indexer K/Q cache, 68 B per 128 dims)
//          Mx4Rule ref:      e = ceil(log2(fl32(max(amax, 6*2^-126) * fl32(1/6)))), clamped to [-127, 127]
//                  ref_floor_1e4: the same with the floor 1e-4 on amax (vLLM before #41015: tiny blocks get a scale
//                            of 2^-15 and zero codes)
//                  nearest:  e = the integer nearest to the exact log2(fl32(amax / 6)) (never a tie), amax 0 gives
//                            -127, clamped to [-127, 127]: sglang's 368-byte record (mxfp4_k_cache.py: round(log2(max(
//                            amax, 1e-40)) - fl32(log2 6)), half-even in torch, floor(x + 0.5) in Triton, byte clamped
//                            to [0, 255]). For every bf16 amax the three give the same byte, with log2 at least 2^-9
//                            away from a rounding boundary (tests/python/test_fp4_codecs.py checks all of them), so a
//                            GPU log2 with an error below that agrees too; fp32 amaxes within that band of
//                            k + 0.5 + log2 6 are not modelled (the writer stages take bf16).
//          codes e2m1(x * 2^-e) (fp32 product; |x| 2^-e up to 8.5 with `nearest` saturates to 6), byte e + 127
// A block holding a NaN (the rules whose amax skips NaN elements excepted): amax is NaN, every scale rule gives a NaN scale (ue8m0 0xFF whatever byte_max, e4m3 0x7F),
// and every code of the block is x / NaN or x * NaN = NaN, written as the code of +NaN (e4m3 0x7F; e2m1 by the
// NanCode): the sign of a NaN product is not portable. A block holding inf but
// no NaN: the rules above evaluated as written (MXFP8: t = inf, e = 128, byte clamp(255, 0, byte_max), codes of the
// finite elements x * 2^-128 = 0, of an inf 448; NVFP4 flashmla: NaN scale; MXFP4: e = 128 clamped to 127).
#pragma once
#include <cstdint>

#include "numerics/fp8_core.hpp"
#include "numerics/half_core.hpp"
#include "numerics/hd.hpp"

namespace dsa::fp4core {

enum class Tie : std::uint8_t { rne, half_down };
enum class ZeroSign : std::uint8_t { keep, clear, lt_zero };
enum class NanCode : std::uint8_t { zero, max };
enum class Mx8Rule : std::uint8_t { ref, flashmla };
enum class Nv4Rule : std::uint8_t { ref, vllm, flashmla, flashmla352, vllm352, flashinfer384, lil432 };
enum class Mx4Rule : std::uint8_t { ref, nearest, ref_floor_1e4 };

struct E2m1Opts {
  Tie tie = Tie::rne;
  ZeroSign zero = ZeroSign::keep;
  NanCode nan = NanCode::zero;
};

using fp8core::bits;
using fp8core::from_bits;
using fp8core::is_nan;

DSA_HD inline float e2m1_magnitude(unsigned index) {
  switch (index & 7u) {
    case 0: return 0.0f;
    case 1: return 0.5f;
    case 2: return 1.0f;
    case 3: return 1.5f;
    case 4: return 2.0f;
    case 5: return 3.0f;
    case 6: return 4.0f;
    default: return 6.0f;
  }
}

DSA_HD inline float e2m1_to_f32(std::uint8_t nibble) {
  const float m = e2m1_magnitude(nibble & 7u);
  return (nibble & 8u) ? -m : m;
}

DSA_HD inline std::uint8_t f32_to_e2m1(float x, const E2m1Opts& o) {
  const std::uint32_t u = bits(x);
  const unsigned sign = (o.zero == ZeroSign::lt_zero ? x < 0.0f : (u >> 31) != 0) ? 8u : 0u;
  if (is_nan(x)) return static_cast<std::uint8_t>(o.nan == NanCode::zero ? 0u : (((u >> 31) ? 8u : 0u) | 7u));
  const float a = from_bits(u & 0x7FFFFFFFu);
  // Midpoints between index i and i + 1 (all exact in fp32).
  const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  unsigned idx = 0;
  for (unsigned i = 0; i < 7; ++i) idx += a > mid[i] ? 1u : 0u;
  if (idx < 7 && a == mid[idx] && o.tie == Tie::rne && (idx & 1u)) ++idx;  // a tie: to the even index
  if (idx == 0 && o.zero == ZeroSign::clear) return 0;
  return static_cast<std::uint8_t>(sign | idx);
}

// ceil(log2 t) of a finite fp32 t > 0 (exact: the exponent, plus one when the mantissa is not zero; subnormals by
// their leading bit).
DSA_HD inline int ceil_log2(float t) {
  const std::uint32_t u = bits(t);
  const int ef = static_cast<int>((u >> 23) & 0xFFu);
  const std::uint32_t m = u & 0x7FFFFFu;
  if (ef != 0) return ef - 127 + (m != 0 ? 1 : 0);
  int c = 0;
  while ((1u << c) < m) ++c;
  return -149 + c;
}

// 2^e as an fp32 for e in [-149, 127] (subnormal powers of two included).
DSA_HD inline float exp2i(int e) {
  return e < -126 ? from_bits(1u << (e + 149)) : from_bits(static_cast<std::uint32_t>(e + 127) << 23);
}

DSA_HD inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }  // NaN stays

// ---- MXFP8: n elements (a multiple of 32) -> n e4m3 codes + n/32 ue8m0 bytes ----
// n = 128 for the V4.1 indexer's FP8 option (one power-of-two scale per 128 dims, stored as the fp32 ue8m0_decode of
// the byte: 2^e, or NaN for 0xFF).
DSA_HD inline void mxfp8_block(const float* x, std::uint8_t* codes, std::uint8_t* scale_byte, Mx8Rule rule, int byte_max, int n = 32) {
  const float amax = fp8core::block_amax(x, n);
  if (is_nan(amax)) {
    *scale_byte = 0xFF;
    for (int i = 0; i < n; ++i) codes[i] = 0x7F;  // +NaN (the sign of x * NaN is not portable)
    return;
  }
  float t;
  if (rule == Mx8Rule::ref) t = (amax > 1e-4f ? amax : 1e-4f) * fp8core::inv448();
  else {
    const float q = amax / 448.0f;
    t = q > 1e-4f ? q : 1e-4f;
  }
  int e = bits(t) >= 0x7F800000u ? 128 : ceil_log2(t);  // t inf (amax inf): e = 128
  int byte = e + 127;
  byte = byte < 0 ? 0 : (byte > byte_max ? byte_max : byte);
  *scale_byte = static_cast<std::uint8_t>(byte);
  const float inv = exp2i(-e);  // 2^-e, exact (e in [-22, 128] here: t >= 1e-4 / 448)
  for (int i = 0; i < n; ++i) codes[i] = fp8core::f32_to_e4m3(clampf(x[i] * inv, -448.0f, 448.0f));
}

// e4m3 with saturation (CUDA __nv_fp8_e4m3(float), PTX cvt.rn.satfinite): finite or infinite values beyond 448 give
// +-448, NaN the NaN code.
DSA_HD inline std::uint8_t f32_to_e4m3_sat(float x) { return fp8core::f32_to_e4m3(clampf(x, -448.0f, 448.0f)); }

// amax of n values skipping NaN elements (CUDA fmaxf): an all-NaN block gives 0.
DSA_HD inline float block_amax_skip_nan(const float* x, int n) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float a = from_bits(bits(x[i]) & 0x7FFFFFFFu);
    amax = a > amax ? a : amax;  // false for NaN
  }
  return amax;
}

// ---- NVFP4: 16 elements -> 8 packed bytes (element 2i in the low nibble) + an e4m3 scale byte ----
DSA_HD inline void nvfp4_block(const float* x, std::uint8_t* packed, std::uint8_t* scale_byte, Nv4Rule rule, const E2m1Opts& o) {
  const bool skip_nan = rule == Nv4Rule::vllm352 || rule == Nv4Rule::flashinfer384 || rule == Nv4Rule::lil432;
  const float amax = skip_nan ? block_amax_skip_nan(x, 16) : fp8core::block_amax(x, 16);
  const float lo = 1.0f / 512.0f;  // 2^-9 = 6 * 2^-9 / 6: the smallest e4m3 subnormal step scale a floor gives
  std::uint8_t sb;
  if (is_nan(amax)) {
    sb = 0x7F;
  } else if (rule == Nv4Rule::ref) {
    const float a = amax > 6.0f * lo ? amax : 6.0f * lo;
    sb = fp8core::f32_to_e4m3(a / 6.0f);
  } else if (rule == Nv4Rule::vllm) {
    sb = fp8core::f32_to_e4m3(clampf(amax * (1.0f / 6.0f), lo, 448.0f));
  } else if (rule == Nv4Rule::flashmla) {
    sb = bits(amax) >= 0x7F800000u ? std::uint8_t{0x7F} : fp8core::f32_to_e4m3(clampf(amax / 6.0f, lo, 448.0f));
  } else if (rule == Nv4Rule::flashmla352 || rule == Nv4Rule::vllm352) {
    const float q = amax / 6.0f, t = q > lo ? q : lo;
    sb = rule == Nv4Rule::vllm352 ? f32_to_e4m3_sat(t) : fp8core::f32_to_e4m3(t);
    if (sb < 0x7E && halfcore::e4m3_to_f32(sb) < t) ++sb;  // rounded up to the next e4m3, never past 448
  } else {  // flashinfer384, lil432: no floor, saturating
    sb = f32_to_e4m3_sat(rule == Nv4Rule::lil432 ? amax * (1.0f / 6.0f) : amax / 6.0f);
  }
  *scale_byte = sb;
  const float s = halfcore::e4m3_to_f32(sb);
  if (is_nan(s)) {  // every code x / NaN: the +NaN code of the policy
    const std::uint8_t c = f32_to_e2m1(fp8core::quiet_nan(), o);
    for (int i = 0; i < 8; ++i) packed[i] = static_cast<std::uint8_t>(c | (c << 4));
    return;
  }
  const bool mul = rule == Nv4Rule::vllm352 || rule == Nv4Rule::flashinfer384 || rule == Nv4Rule::lil432;
  const float inv = s == 0.0f ? 0.0f : 1.0f / s;  // the reciprocal rules: S = 0 gives zero codes
  auto q = [&](float v) { return mul ? v * inv : v / s; };
  for (int i = 0; i < 8; ++i) {
    const std::uint8_t c0 = f32_to_e2m1(clampf(q(x[2 * i]), -6.0f, 6.0f), o);
    const std::uint8_t c1 = f32_to_e2m1(clampf(q(x[2 * i + 1]), -6.0f, 6.0f), o);
    packed[i] = static_cast<std::uint8_t>(c0 | (c1 << 4));
  }
}

// ---- MXFP4: 32 elements -> 16 packed bytes + a ue8m0 scale byte ----
DSA_HD inline void mxfp4_block(const float* x, std::uint8_t* packed, std::uint8_t* scale_byte, Mx4Rule rule, const E2m1Opts& o) {
  const float amax = fp8core::block_amax(x, 32);
  int e;
  if (is_nan(amax)) {
    e = 128;
  } else if (bits(amax) >= 0x7F800000u) {
    e = 127;
  } else if (rule == Mx4Rule::ref || rule == Mx4Rule::ref_floor_1e4) {
    const float floor = rule == Mx4Rule::ref ? 6.0f * exp2i(-126) : 1e-4f;
    e = ceil_log2((amax > floor ? amax : floor) * (1.0f / 6.0f));
  } else {
    const float r = amax / 6.0f;
    if (r == 0.0f) {
      e = -127;
    } else {  // round(log2 r): r = m 2^k, m in [1, 2): k + (m > sqrt 2); the largest fp32 m below sqrt 2 is 0x3FB504F3
      const std::uint32_t u = bits(r);
      const int ef = static_cast<int>((u >> 23) & 0xFFu);
      if (ef != 0) {
        e = ef - 127 + ((u & 0x7FFFFFu) > 0x3504F3u ? 1 : 0);
      } else {  // subnormal r: normalize the mantissa
        std::uint32_t m = u & 0x7FFFFFu;
        int k = -126;
        while (!(m & 0x800000u)) {
          m <<= 1;
          --k;
        }
        e = k + ((m & 0x7FFFFFu) > 0x3504F3u ? 1 : 0);
      }
    }
  }
  e = e < -127 ? -127 : (e > 127 && !is_nan(amax) ? 127 : e);
  *scale_byte = static_cast<std::uint8_t>(is_nan(amax) ? 0xFF : e + 127);
  if (is_nan(amax)) {  // every code x * NaN: the +NaN code of the policy
    const std::uint8_t c = f32_to_e2m1(fp8core::quiet_nan(), o);
    for (int i = 0; i < 16; ++i) packed[i] = static_cast<std::uint8_t>(c | (c << 4));
    return;
  }
  const float inv = exp2i(-e);
  for (int i = 0; i < 16; ++i) {
    const std::uint8_t c0 = f32_to_e2m1(x[2 * i] * inv, o);
    const std::uint8_t c1 = f32_to_e2m1(x[2 * i + 1] * inv, o);
    packed[i] = static_cast<std::uint8_t>(c0 | (c1 << 4));
  }
}

// Dequantized values (exact in bf16, spec §2): MXFP8 code * 2^(byte - 127); NVFP4 e2m1 * e4m3; MXFP4 e2m1 * 2^(byte - 127).
DSA_HD inline float ue8m0_decode(std::uint8_t b) { return b == 0xFF ? fp8core::quiet_nan() : exp2i(static_cast<int>(b) - 127); }

// The fp32 scale of the V4.1 indexer's FP8 option (mxfp8_block over n elements, byte_max 255, gave byte b): 2^(b-127);
// a block with a NaN: NaN; an inf block (e = 128): +inf, what exp2(ceil(log2(inf))) gives.
DSA_HD inline float fp8_pow2_scale(const float* x, int n, std::uint8_t b) {
  if (b != 0xFF) return exp2i(static_cast<int>(b) - 127);
  return is_nan(fp8core::block_amax(x, n)) ? fp8core::quiet_nan() : from_bits(0x7F800000u);
}

}  // namespace dsa::fp4core
