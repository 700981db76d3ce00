// The scalar fp8 quantization math shared by the CPU reference and the CUDA backend (determinism contract, way 3:
// one fixed sequence of IEEE fp32 operations and integer bit manipulations, compiled for both; architecture.md).
// Plain C++17 with no project includes, so nvcc compiles it for the device: bit casts through memcpy, no libm.
//   f32_to_e4m3   RNE, no saturation (see formats.hpp for the rules, checked exhaustively there)
//   pow2_ceil     2^ceil(log2 t) for t >= 0 (subnormal t exact by integer arithmetic), NaN propagates
//   scales        the act_quant / cache-writer rules (formats.hpp: ue8m0_scale, pow2_div_scale, ...)
//   quant_block   amax (exact, NaN propagates) -> scale -> codes, the element step x/s or fl32(x*fl32(1/s))
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::fp8core {

DSA_HD inline std::uint32_t bits(float x) { return hd::bits32(x); }
DSA_HD inline float from_bits(std::uint32_t u) { return hd::from_bits32(u); }
DSA_HD inline bool is_nan(float x) { return x != x; }
// IEEE fmax: a NaN operand gives the other one.
DSA_HD inline float fmax_ieee(float a, float b) { return is_nan(a) ? b : is_nan(b) ? a : (a > b ? a : b); }
DSA_HD inline float quiet_nan() { return from_bits(0x7FC00000u); }

DSA_HD inline std::uint8_t f32_to_e4m3(float x) {
  // Branch-free (every path computed, then selected) so that loops over it vectorize.
  const std::uint32_t u = bits(x);
  const std::uint32_t sign = (u >> 24) & 0x80u;
  const std::uint32_t a = u & 0x7FFFFFFFu;
  // >= 2^-6: normal e4m3; RNE at 3 mantissa bits, carry into the exponent (wraps harmlessly when not selected).
  const std::uint32_t normal = ((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
  // Below 2^-6: |x| / 2^-9 (exact) rounded to an integer 0..8 by the 2^23 trick (8 = the smallest normal); the
  // clamp keeps the (unselected) conversion of large inputs defined.
  const float t = from_bits(a < 0x3C800000u ? a : 0x3C800000u);
  const std::uint32_t sub = static_cast<std::uint32_t>((t * 512.0f + 8388608.0f) - 8388608.0f);  // IEEE: not folded
  // > 464 (the tie between 448 and the missing 480), inf, NaN: NaN 0x7F with the sign.
  const std::uint32_t mag = a > 0x43E80000u ? 0x7Fu : (a >= 0x3C800000u ? normal : sub);
  return static_cast<std::uint8_t>(sign | mag);
}

// 2^ceil(log2 t), t >= 0 or NaN; 0 for t = 0 (2^-inf).
DSA_HD inline float pow2_ceil(float t) {
  if (is_nan(t)) return t;
  if (t == 0.0f) return 0.0f;
  const std::uint32_t u = bits(t);
  const int exp_field = static_cast<int>((u >> 23) & 0xFFu);
  int e;
  if (exp_field == 0) {  // subnormal: t = m 2^-149, ceil(log2 t) = -149 + ceil(log2 m)
    const std::uint32_t m = u & 0x7FFFFFu;
    int c = 0;
    while ((1u << c) < m) ++c;  // ceil(log2 m), m < 2^23
    e = -149 + c;
  } else {
    e = exp_field - 127 + ((u & 0x7FFFFFu) != 0 ? 1 : 0);
  }
  if (e < -126) return from_bits(1u << (e + 149));  // subnormal power of two
  return from_bits(static_cast<std::uint32_t>(e + 127) << 23);  // e <= 128: 128 gives inf
}

// fl32(1/448) = 0x3B124925, the constant the kernels multiply by.
DSA_HD inline float inv448() { return from_bits(0x3B124925u); }

enum class Fmt : int { ue8m0 = 0, fp32_div = 1, fp32_mul = 2, pow2_div = 3, fp32_floor = 4 };

DSA_HD inline float scale_of(Fmt f, float amax, float eps) {
  if (is_nan(amax)) return amax;  // NaN propagates (torch clamp_min semantics)
  switch (f) {
    case Fmt::ue8m0: return pow2_ceil(fmax_ieee(amax, eps) * inv448());
    case Fmt::fp32_div: return fmax_ieee(amax, eps) / 448.0f;
    case Fmt::fp32_mul: return fmax_ieee(amax, eps) * inv448();
    case Fmt::pow2_div: return pow2_ceil(fmax_ieee(amax / 448.0f, eps));
    default: return fmax_ieee(amax / 448.0f, eps);  // fp32_floor: max(amax/448, floor)
  }
}

// Whether the element step may multiply by fl32(1/s) instead of dividing by s with the same bits: s a positive
// power of two whose reciprocal is exact (both then round the same exact value x 2^-e once).
DSA_HD inline bool exact_reciprocal(float s, float inv) {
  const std::uint32_t sb = bits(s);
  const std::uint32_t ef = (sb >> 23) & 0xFFu;
  return (sb & 0x7FFFFFu) == 0 && ef != 0 && ef != 0xFFu && inv - inv == 0.0f && inv * s == 1.0f && inv != 0.0f;
}

// One code: x/s (div) or fl32(x * fl32(1/s)) (mul), clamped to +-448 when asked (NaN stays NaN), RNE to e4m3.
DSA_HD inline std::uint8_t encode(float x, bool mul, bool clamp, float s, float inv) {
  float v = mul ? x * inv : x / s;
  if (clamp) v = v < -448.0f ? -448.0f : (v > 448.0f ? 448.0f : v);
  return f32_to_e4m3(v);
}

// max |x| (exact); NaN when an element is NaN.
DSA_HD inline float block_amax(const float* x, std::int64_t n) {
  float amax = 0.0f;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = from_bits(bits(x[i]) & 0x7FFFFFFFu);
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  return nan ? quiet_nan() : amax;
}

// The e8m0 byte of a scale (MODEL1 cache scale records): the exponent field of a positive finite s (2^(byte - 127)
// for powers of two; 0 for subnormals), 0xFF (NaN) for zero, negative, inf and NaN scales.
DSA_HD inline std::uint8_t e8m0_of(float s) {
  const std::uint32_t ef = (bits(s) >> 23) & 0xFFu;
  return s > 0.0f && ef != 0xFFu ? static_cast<std::uint8_t>(ef) : std::uint8_t{0xFF};
}

}  // namespace dsa::fp8core
