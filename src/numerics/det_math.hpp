// Deterministic elementary functions (+, *, /, and exactly rounded IEEE operations only: no libm, no intrinsics), so
// the bits are the same on every machine, compiler and backend. Each is a fixed sequence of IEEE operations that
// cuda.cu code can repeat: det_exp and det_log are DSA_HD (same header, same operations on both backends).
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::num {

// sin/cos: x = n*(pi/2) + r (Cody-Waite, 3-part pi/2), Taylor series on |r| <= pi/4; within 1 ulp of libm.
double det_sin(double x);
double det_cos(double x);

namespace detail {
using hd::from_bits64;
DSA_HD inline double pow2i(std::int64_t k) {  // 2^k for -1022 <= k <= 1023 (exact, by construction of the bits)
  return from_bits64(static_cast<std::uint64_t>(k + 1023) << 52);
}
DSA_HD inline double inf64() { return from_bits64(0x7FF0000000000000ull); }
DSA_HD inline double nan64() { return from_bits64(0x7FF8000000000000ull); }
}  // namespace detail

// e^x within ~1 ulp: k = rne(x*log2(e)) by the 1.5*2^52 shifter (IEEE add, no libm), r = x - k*ln2 in two parts
// (Cody-Waite, |r| <= 0.35), degree-13 Taylor polynomial in Horner order, times 2^k applied as two exact powers of two
// (one rounding when the result is subnormal). e^-inf = 0, e^+inf = inf, NaN -> NaN, overflow -> inf.
DSA_HD inline double det_exp(double x) {
  if (x != x) return x;
  if (x > 709.8) return detail::inf64();
  if (x < -746.0) return 0.0;
  const double shifter = 0x1.8p52;
  const double k = (x * 0x1.71547652b82fep0 + shifter) - shifter;
  const double r = (x - k * 0x1.62e42fefa3800p-1) - k * 0x1.ef35793c7673p-45;
  double p = 1.0 / 6227020800.0;  // 1/13!, then Horner down to 1/0! (no static table: device code)
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const auto ki = static_cast<std::int64_t>(k);
  const std::int64_t k1 = ki / 2, k2 = ki - k1;
  return (p * detail::pow2i(k1)) * detail::pow2i(k2);
}

// ln x within ~1 ulp: x = m * 2^e with m in [sqrt(1/2), sqrt(2)) (bits; subnormals prescaled by 2^54), f = (m-1)/(m+1),
// ln m = 2f(1 + f^2/3 + f^4/5 + ... + f^24/25) in Horner order, + e*ln2 in two parts. ln 0 = -inf, ln(x<0) = NaN,
// ln inf = inf, NaN -> NaN.
DSA_HD inline double det_log(double x) {
  if (x != x) return x;
  if (x < 0) return detail::nan64();
  if (x == 0) return -detail::inf64();
  if (x == detail::inf64()) return x;
  std::int64_t e = 0;
  if (x < 0x1p-1022) {
    x *= 0x1p54;
    e = -54;
  }
  std::uint64_t b;
  memcpy(&b, &x, sizeof b);
  e += static_cast<std::int64_t>((b >> 52) & 0x7FF) - 1023;
  b = (b & 0x000FFFFFFFFFFFFFull) | 0x3FF0000000000000ull;
  double m = detail::from_bits64(b);
  if (m > 0x1.6a09e667f3bcdp0) {
    m *= 0.5;
    e += 1;
  }
  const double f = (m - 1.0) / (m + 1.0), s = f * f;
  double p = 1.0 / 25.0;
  for (int j = 23; j >= 1; j -= 2) p = p * s + 1.0 / static_cast<double>(j);
  const double ed = static_cast<double>(e);
  return ed * 0x1.62e42fefa3800p-1 + (2.0 * f * p + ed * 0x1.ef35793c7673p-45);
}

}  // namespace dsa::num
