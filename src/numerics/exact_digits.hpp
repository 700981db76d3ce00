// Exact fp8 dot products on int8 tensor cores (../shared/specs/gpu_exact_dot.md), shared by the CPU tests and the
// CUDA logits kernels (plain C++17, no project includes, DSA_HD from fp8_core.hpp).
//
// Every e4m3fn value times 2^9 is an integer x with |x| <= 448 * 2^9 = 229376 < 2^18 (logits_engine.hpp (1)). Its
// balanced base-64 digits
//   x0 = ((x + 32) mod 64) - 32            in [-32, 31]
//   x1 = (((x - x0)/64 + 32) mod 64) - 32  in [-32, 31]
//   x2 = (x - x0 - 64 x1) / 4096           |x2| <= 56
// fit int8 and x = x2 2^12 + x1 2^6 + x0, so  sum_d x_d y_d = sum_{i,j} 2^(6(i+j)) sum_d x_{i,d} y_{j,d}: nine int8
// products with int32 sums (|x_i y_j| <= 56^2 and <= 32 * 56, a D <= 128 sum of up to three digit pairs of one
// shift stays below 2^21), combined with shifts in int64: the exact s * 2^18 in any order.
// NaN codes (0x7F, 0xFF) have no integer: their digits are 0 and the `nan` flag says so.
//
// f64_to_bf16_odd: RNE f64 -> bf16 through round-to-odd at fp32 (24 >= 8 + 2 bits: the double rounding is exact);
// the device's bf16 rounding of the exact logits, equal to num::f64_to_bf16 (tests/cpp/test_numerics.cpp).
#pragma once
#include <cstdint>

#include "numerics/fp8_core.hpp"

namespace dsa::exactdot {

// x = e4m3(code) * 2^9 (0 for NaN codes).
DSA_HD inline std::int32_t scaled_int(std::uint8_t code) {
  const std::int32_t mant = code & 7, ef = (code >> 3) & 15;
  if ((code & 0x7F) == 0x7F) return 0;
  const std::int32_t mag = ef == 0 ? mant : (8 + mant) << (ef - 1);  // value = mag * 2^-9
  return (code & 0x80) ? -mag : mag;
}
DSA_HD inline bool is_nan_code(std::uint8_t code) { return (code & 0x7F) == 0x7F; }

struct Digits {
  std::int8_t d[3];
};
DSA_HD inline Digits digits(std::int32_t x) {
  const std::int32_t x0 = ((x + 32) % 64 + 64) % 64 - 32;
  const std::int32_t t = (x - x0) / 64;
  const std::int32_t x1 = ((t + 32) % 64 + 64) % 64 - 32;
  const std::int32_t x2 = (t - x1) / 64;
  return {{static_cast<std::int8_t>(x0), static_cast<std::int8_t>(x1), static_cast<std::int8_t>(x2)}};
}
// The three digits of a code packed little-endian in the low 3 bytes, bit 24 = NaN code.
DSA_HD inline std::uint32_t packed_digits(std::uint8_t code) {
  const Digits g = digits(scaled_int(code));
  return static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[0])) |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[1])) << 8 |
         static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[2])) << 16 |
         (is_nan_code(code) ? 1u << 24 : 0u);
}

// Toom-3 evaluations of a code's digit polynomial x(t) = x0 + x1 t + x2 t^2 at t = 1 and t = -1 (both fit int8:
// [-120, 118] and [-119, 119]), the extra planes of the sm_90a logits engine (engines/logits/logits_wgmma.hpp).
DSA_HD inline std::int8_t toom_p1(const Digits& g) { return static_cast<std::int8_t>(g.d[0] + g.d[1] + g.d[2]); }
DSA_HD inline std::int8_t toom_m1(const Digits& g) { return static_cast<std::int8_t>(g.d[0] - g.d[1] + g.d[2]); }
// Its recombination (logits_wgmma.hpp) from the int32 unit sums P1 = sum x(1) y(1), Pm1 = sum x(-1) y(-1),
// c4 = sum x2 y2, c1 = sum x0 y1 + x1 y0, c0 = sum x0 y0: X = 65 P1 - 63 Pm1 and Y = c0 + 64 (c1 - 64 c4), each below
// 2^31 for D <= 128 (so is every step of Y), and sum x y = 2048 X - 4095 Y.
DSA_HD inline std::int64_t wg_value(std::int32_t x, std::int32_t y) { return static_cast<std::int64_t>(x) * 2048ll + static_cast<std::int64_t>(y) * -4095ll; }

// RNE double -> bf16 bits (NaN -> 0x7FC0 with the sign dropped, as logits' round_to).
DSA_HD inline std::uint16_t f64_to_bf16_odd(double v) {
  if (v != v) return 0x7FC0u;
  std::uint64_t u;
  memcpy(&u, &v, sizeof u);
  const std::uint64_t sign = u >> 63;
  const double a = sign ? -v : v;
  // fl32 toward zero of a, then round to odd: the lsb records any discarded bit.
  float t = static_cast<float>(a);  // RNE; step back toward zero when it rounded up
  if (static_cast<double>(t) > a) {
    std::uint32_t tb = fp8core::bits(t) - 1u;
    t = fp8core::from_bits(tb);
  }
  std::uint32_t tb = fp8core::bits(t);
  if (static_cast<double>(t) != a) tb |= 1u;  // inexact: odd (also saturates a > FLT_MAX at 0x7F7FFFFF)
  const std::uint32_t lsb = (tb >> 16) & 1u;
  const std::uint32_t r = (tb + 0x7FFFu + lsb) >> 16;
  return static_cast<std::uint16_t>(r | (sign << 15));
}

}  // namespace dsa::exactdot
