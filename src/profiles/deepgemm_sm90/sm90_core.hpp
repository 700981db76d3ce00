// The deepgemm-sm90 model's scalar core (sm90.hpp, ../shared/specs/sm90_fp8_wgmma.md), DSA_HD: the CPU emulation
// (sm90.cpp) and the CUDA one (engines/logits/logits_cuda.cu) run these same integer and fp32 operations.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics/half_core.hpp"
#include "numerics/hd.hpp"

namespace dsa::profiles::sm90 {

constexpr int kZeroExp = -100;  // exponent given to zero operands: a product with a zero factor never sets e

// An e4m3fn code as (signed significand, exponent): value = sig * 2^(exp - 3); subnormals count as exponent -6,
// zeros get kZeroExp; returns true for the NaN codes 0x7F / 0xFF (sig 0, exp 0).
DSA_HD inline bool decode_code(std::uint8_t code, std::int32_t& sig, std::int32_t& exp) {
  const int mant = code & 7, ef = (code >> 3) & 15;
  if ((code & 0x7F) == 0x7F) {
    sig = 0, exp = 0;
    return true;
  }
  const int s = ef == 0 ? mant : 8 + mant;
  exp = ef == 0 ? (mant == 0 ? kZeroExp : -6) : ef - 7;
  sig = (code & 0x80) != 0 ? -s : s;
  return false;
}

DSA_HD inline int floor_log2_u64(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return 63 - __clzll(static_cast<long long>(x));
#else
  return 63 - __builtin_clzll(x);
#endif
}

// sign(v) * trunc(|v| / 2^sh) for sh >= 0 (truncation toward zero), v * 2^-sh for sh < 0.
DSA_HD inline std::int64_t shift_trunc(std::int64_t v, int sh) {
  if (sh <= 0) return v * (std::int64_t{1} << (-sh));
  if (sh > 62) return 0;
  const std::int64_t m = (v < 0 ? -v : v) >> sh;
  return v < 0 ? -m : m;
}

// One 32-element chunk of a WGMMA dot product (§1), accumulated into acc = T * 2^u (start T = 0, u = 0; chunks in
// order): as/ae/bs/be the 32 elements' significands and exponents. Every non-zero product P * 2^(pe-6)
// (|P| <= 225, pe <= e) is truncated to a multiple of 2^(e-13): trunc(|P| * 2^(pe - e + 7)) = (|P| << 7) >> (e - pe)
// (< 2^15: int32 lanes suffice; a chunk sums at most 32 * 28800 + 2^14 < 2^20). Afterwards |T| < 2^14.
DSA_HD inline void wgmma_chunk(const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs, const std::int32_t* be,
                               std::int64_t& T, int& u) {
  std::int32_t e = 2 * kZeroExp;
  for (int i = 0; i < 32; ++i) e = ae[i] + be[i] > e ? ae[i] + be[i] : e;
  if (T != 0) {
    const std::int32_t et = floor_log2_u64(static_cast<std::uint64_t>(T < 0 ? -T : T)) + u;
    e = et > e ? et : e;
  }
  if (e < -12) return;  // real products have pe >= -12; zero factors give <= kZeroExp + 8: acc stays 0
  const int unit = e - 13;
  std::int32_t psum = 0;
  for (int i = 0; i < 32; ++i) {
    const std::int32_t P = as[i] * bs[i];
    const std::int32_t d = e - (ae[i] + be[i]);
    const std::int32_t sh = d < 31 ? d : 31;
    const std::int32_t m = ((P < 0 ? -P : P) << 7) >> sh;
    psum += P < 0 ? -m : m;
  }
  const std::int64_t sum = psum + (T != 0 ? shift_trunc(T, unit - u) : 0);
  if (sum == 0) {
    T = 0;
    u = 0;
    return;
  }
  std::uint64_t mag = static_cast<std::uint64_t>(sum < 0 ? -sum : sum);
  const int nb = floor_log2_u64(mag);
  if (nb > 13) mag = (mag >> (nb - 13)) << (nb - 13);
  T = sum < 0 ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
  u = unit;
}

// T * 2^u in fp32: |T| has <= 14 significant bits and 2^u >= 2^-25, so exact (a product by an exact power of two).
DSA_HD inline float tu_to_f32(std::int64_t T, int u) {
  std::uint32_t b = static_cast<std::uint32_t>(u + 127) << 23;
  float p;
  memcpy(&p, &b, 4);
  return static_cast<float>(T) * p;
}

DSA_HD inline float fmax0(float s) { return s != s ? 0.0f : (s > 0.0f ? s : 0.0f); }  // CUDA fmaxf(s, 0): NaN -> 0

// §2: the per-(row, key) head reduction of the sm90 kernels. s[H] fp32 dot products, w[H] fp32 head weights,
// sc the key's fp32 scale; H a multiple of 8. relu is the kernel's fmaxf(s, 0).
template <class S>
DSA_HD inline float head_reduce_fn(S s, const float* w, int H, float sc) {
  const int G = H / 8;  // heads per chain
  float P[4];
  for (int c = 0; c < 4; ++c) {
    float chain[2];
    for (int p = 0; p < 2; ++p) {
      const int h0 = 2 * c + p;
      const float r0 = fmax0(s(h0));
      float acc;
      if (G == 1) {
        acc = r0 * w[h0];
      } else {
        const float r1 = fmax0(s(h0 + 8));
        acc = fmaf(r0, w[h0], r1 * w[h0 + 8]);  // the compiler contracts the first pair this way
        for (int g = 2; g < G; ++g) acc = fmaf(fmax0(s(h0 + 8 * g)), w[h0 + 8 * g], acc);
      }
      chain[p] = acc;
    }
    P[c] = (chain[0] + chain[1]) * sc;
  }
  return (P[0] + P[1]) + (P[2] + P[3]);
}

// The emulated logit's output bits: fp32, or bf16 by RNE (num::f32_to_bf16: NaN -> 0x7FC0 with the sign).
DSA_HD inline std::uint32_t out_bits(float x, bool bf16) { return bf16 ? halfcore::f32_to_bf16(x) : halfcore::bits32(x); }

}  // namespace dsa::profiles::sm90
