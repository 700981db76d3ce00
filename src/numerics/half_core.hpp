// 16-bit and 8-bit float conversions as DSA_HD bit manipulation, for scoring code that cpu.cpp and cuda.cu share
// (architecture.md, determinism contract way 3). Plain C++17, no libm, no tables, no numeric_limits: nvcc compiles it
// for the device unchanged. Each function equals its formats.hpp counterpart on every input (tests/cpp/
// test_numerics.cpp: all 65 536 fp16 / bf16 patterns, all 256 e4m3 codes, and f64 -> fp16 on every fp16 value, every
// midpoint between neighbours and a step either side of each, the subnormal / overflow edges, inf, NaN and random
// doubles), NaN included (the canonical quiet NaN with the input's sign).
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::halfcore {

DSA_HD inline float f32_of_bits(std::uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
DSA_HD inline std::uint64_t bits_f64(double x) {
  std::uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

// bf16 -> f32: the high half of the fp32 pattern (num::bf16_to_f32).
DSA_HD inline float bf16_to_f32(std::uint16_t b) { return f32_of_bits(static_cast<std::uint32_t>(b) << 16); }

// fp16 -> f32, exact (num::fp16_to_f32): NaN gives 0x7FC00000 with the sign.
DSA_HD inline float fp16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t ef = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (ef == 0x1Fu) return f32_of_bits(sign | (mant != 0 ? 0x7FC00000u : 0x7F800000u));
  if (ef == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32 (a normal number when mant != 0)
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return f32_of_bits(sign | ((ef + 112u) << 23) | (mant << 13));  // exponent bias 15 -> 127
}

// e4m3fn -> f32, exact (num::e4m3_to_f32): 0x7F / 0xFF give 0x7FC00000 with the sign; -0 stays -0.
DSA_HD inline float e4m3_to_f32(std::uint8_t c) {
  const std::uint32_t sign = static_cast<std::uint32_t>(c & 0x80u) << 24;
  const std::uint32_t ef = (c >> 3) & 0xFu, mant = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return f32_of_bits(sign | 0x7FC00000u);
  const float v = ef == 0 ? static_cast<float>(mant) * 0x1p-9f                              // subnormal, exact
                          : f32_of_bits(((ef + 120u) << 23) | (mant << 20));               // bias 7 -> 127
  return sign ? -v : v;
}

// f64 -> fp16 bits, one rounding to nearest even from the exact value (num::f64_to_fp16): overflow (|x| >= 65520
// after rounding) gives inf, NaN the canonical 0x7E00 with the sign, the sign of zero kept.
DSA_HD inline std::uint16_t f64_to_fp16(double x) {
  const std::uint64_t u = bits_f64(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 48) & 0x8000u);
  const std::uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  if (a > 0x7FF0000000000000ull) return static_cast<std::uint16_t>(sign | 0x7E00u);   // NaN
  if (a == 0x7FF0000000000000ull) return static_cast<std::uint16_t>(sign | 0x7C00u);  // inf
  const int e = static_cast<int>(a >> 52) - 1023;  // a = sig * 2^(e - 52) for normal doubles
  if (e < -25) return sign;                        // |x| < 2^-25: below half the smallest subnormal (and f64 subnormals)
  if (e > 15) return static_cast<std::uint16_t>(sign | 0x7C00u);  // |x| >= 2^16
  const std::uint64_t sig = (a & 0xFFFFFFFFFFFFFull) | (1ull << 52);
  // The result's quantum 2^q, q = max(e, -14) - 10; n = sig * 2^(e - 52 - q) rounded to an integer (RNE).
  const int shift = 52 - e + ((e < -14 ? -14 : e) - 10);  // 42 .. 53
  std::uint64_t n = sig >> shift;
  const std::uint64_t rem = sig & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (n & 1u))) ++n;
  // Subnormal range: n in [0, 1024] is the code itself (1024 = the smallest normal 0x0400). Normal: exponent field
  // e + 15 and n in [1024, 2048]; n = 2048 carries into the exponent (0x7C00 = inf from e = 15).
  if (e < -14) return static_cast<std::uint16_t>(sign | n);
  return static_cast<std::uint16_t>(sign | ((static_cast<std::uint64_t>(e + 15) << 10) + n - 1024));
}

}  // namespace dsa::halfcore
