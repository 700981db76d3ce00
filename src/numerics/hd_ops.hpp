// Exactly rounded IEEE operations as DSA_HD functions (determinism contract way 3): each has one correct result, so
// the host (std::) and the device (CUDA's IEEE-rounded functions, --fmad=false, -prec-div/-prec-sqrt default) give the
// same bits. Classification and exponent helpers work on the bits. No libm approximation is ever reached: sqrt,
// fma and round-to-integer are correctly rounded on both sides.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::hd {

DSA_HD inline double abs(double x) { return from_bits64(bits64(x) & 0x7FFFFFFFFFFFFFFFull); }
DSA_HD inline float abs(float x) { return from_bits32(bits32(x) & 0x7FFFFFFFu); }
DSA_HD inline bool is_nan(double x) { return x != x; }
DSA_HD inline bool is_nan(float x) { return x != x; }
DSA_HD inline bool is_finite(double x) { return (bits64(x) & 0x7FF0000000000000ull) != 0x7FF0000000000000ull; }
DSA_HD inline double inf64() { return from_bits64(0x7FF0000000000000ull); }
DSA_HD inline float inf32() { return from_bits32(0x7F800000u); }
// std::max / std::min semantics (the first argument unless the comparison says otherwise; NaN-order dependent).
DSA_HD inline double max(double a, double b) { return a < b ? b : a; }
DSA_HD inline float clamp(float v, float lo, float hi) { return v < lo ? lo : (hi < v ? hi : v); }  // std::clamp

DSA_HD inline double sqrt(double x) {
#if defined(__CUDA_ARCH__)
  return ::sqrt(x);
#else
  return std::sqrt(x);
#endif
}
DSA_HD inline double fma(double a, double b, double c) {
#if defined(__CUDA_ARCH__)
  return ::fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
DSA_HD inline float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return ::fmaf(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
// Round to an integer, half to even (the default rounding mode; std::nearbyint), and toward zero.
DSA_HD inline float rint(float x) {
#if defined(__CUDA_ARCH__)
  return ::rintf(x);
#else
  return std::nearbyint(x);
#endif
}
DSA_HD inline float trunc(float x) {
#if defined(__CUDA_ARCH__)
  return ::truncf(x);
#else
  return std::trunc(x);
#endif
}
DSA_HD inline int popcount(std::uint64_t x) {
#if defined(__CUDA_ARCH__)
  return __popcll(static_cast<unsigned long long>(x));
#else
  return __builtin_popcountll(static_cast<unsigned long long>(x));
#endif
}

// 2^k, -1074 <= k <= 1023, exact.
DSA_HD inline double pow2(int k) {
  if (k >= -1022) return from_bits64(static_cast<std::uint64_t>(k + 1023) << 52);
  return from_bits64(std::uint64_t{1} << (k + 1074));
}
// std::frexp's exponent of a finite nonzero x: x = m 2^e with 0.5 <= |m| < 1.
DSA_HD inline int frexp_exp(double x) {
  std::uint64_t a = bits64(x) & 0x7FFFFFFFFFFFFFFFull;
  int adj = 0;
  if (a < 0x0010000000000000ull) {  // subnormal: scale by 2^54 (exact)
    a = bits64(from_bits64(a) * 0x1p54) & 0x7FFFFFFFFFFFFFFFull;
    adj = -54;
  }
  return static_cast<int>(a >> 52) - 1022 + adj;
}
// std::ilogb of a finite nonzero normal or subnormal x (floor(log2 |x|)).
DSA_HD inline int ilogb(double x) { return frexp_exp(x) - 1; }
// std::nextafter(x, +inf) (up) or std::nextafter(x, -inf) (down) for fp32.
DSA_HD inline float next_toward(float x, bool up) {
  if (x != x) return x;
  const std::uint32_t u = bits32(x);
  if ((u & 0x7FFFFFFFu) == 0) return from_bits32(up ? 0x00000001u : 0x80000001u);
  if (up && u == 0x7F800000u) return x;    // +inf stays
  if (!up && u == 0xFF800000u) return x;   // -inf stays
  const bool pos = (u >> 31) == 0;
  return from_bits32(pos == up ? u + 1u : u - 1u);
}

}  // namespace dsa::hd
