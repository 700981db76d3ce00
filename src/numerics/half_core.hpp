// bf16 / fp16 conversions as DSA_HD functions: the stages whose cpu.cpp and cuda.cu share scalar math call these
// (architecture.md, determinism contract way 3). Integer bit manipulation plus IEEE operations that are exact, so the
// host and the device give the same bits. The rules are formats.hpp's (one RNE rounding from the exact input,
// subnormals kept, overflow to inf, NaN to the canonical quiet NaN with the input's sign); f32_to_bf16 is the
// definition num::f32_to_bf16 uses, and tests/cpp/test_numerics.cpp checks every function bit for bit against
// formats.cpp (all 65 536 fp16 / bf16 patterns, all 256 e4m3 codes, f64 -> fp16 / bf16 at every midpoint and a step
// either side, the subnormal / overflow edges, inf, NaN and random doubles).
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::halfcore {

using hd::bits32;
using hd::bits64;
using hd::from_bits32;
using hd::from_bits64;

// Exact: the 16-bit shift (a NaN keeps its payload).
DSA_HD inline float bf16_to_f32(std::uint16_t b) { return from_bits32(static_cast<std::uint32_t>(b) << 16); }

// RNE on the low 16 bits; overflow carries into the exponent and gives inf; NaN -> 0x7FC0 with the sign.
DSA_HD inline std::uint16_t f32_to_bf16(float x) {
  const std::uint32_t u = bits32(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>(((u >> 16) & 0x8000u) | 0x7FC0u);
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
}
DSA_HD inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// One RNE rounding of a double to bf16 (= num::f64_to_bf16). Normal results: RNE of the double's encoding at bit 45
// (the carry moves into the exponent), rebiased 1023 -> 127; results below 2^-126: |x| 2^133 (exact) rounded to an
// integer 0..128 by the 2^52 shifter (128 = the smallest normal's code).
DSA_HD inline std::uint16_t f64_to_bf16(double x) {
  const std::uint64_t u = bits64(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 48) & 0x8000u);
  const std::uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
  if (a > 0x7FF0000000000000ull) return static_cast<std::uint16_t>(sign | 0x7FC0u);
  if (a >= 0x3810000000000000ull) {  // |x| >= 2^-126 (inf included)
    const std::uint64_t lsb = (a >> 45) & 1u;
    const std::uint64_t r = ((a + 0x00000FFFFFFFFFFFull + lsb) >> 45) - (std::uint64_t{1023 - 127} << 7);
    return static_cast<std::uint16_t>(sign | (r >= 0x7F80u ? 0x7F80u : static_cast<std::uint32_t>(r)));
  }
  const double s = from_bits64(a) * 0x1p133;
  const double n = (s + 0x1p52) - 0x1p52;  // IEEE: not folded (no fast-math anywhere)
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(n));
}
DSA_HD inline double bf16_to_f64(std::uint16_t b) { return static_cast<double>(bf16_to_f32(b)); }

// One RNE rounding of an fp32 value to fp16 (= num::f32_to_fp16): NaN -> 0x7E00 with the sign, overflow -> inf.
DSA_HD inline std::uint16_t f32_to_fp16(float x) {
  const std::uint32_t u = bits32(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u);
  if (a >= 0x38800000u) {  // |x| >= 2^-14 (inf included)
    const std::uint32_t lsb = (a >> 13) & 1u;
    const std::uint32_t r = ((a + 0xFFFu + lsb) >> 13) - ((127u - 15u) << 10);
    return static_cast<std::uint16_t>(sign | (r >= 0x7C00u ? 0x7C00u : r));
  }
  const float s = from_bits32(a) * 0x1p24f;   // exact: a normal fp32 below 2^10
  const float n = (s + 0x1p23f) - 0x1p23f;    // RNE to an integer 0..1024 (1024 = the smallest normal's code)
  return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(n));
}

// fp16 -> f32, exact (num::fp16_to_f32): NaN gives 0x7FC00000 with the sign.
DSA_HD inline float fp16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t ef = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (ef == 0x1Fu) return from_bits32(sign | (mant != 0 ? 0x7FC00000u : 0x7F800000u));
  if (ef == 0) {  // zero or subnormal: mant * 2^-24, exact in fp32 (a normal number when mant != 0)
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return from_bits32(sign | ((ef + 112u) << 23) | (mant << 13));  // exponent bias 15 -> 127
}

// e4m3fn -> f32, exact (num::e4m3_to_f32): 0x7F / 0xFF give 0x7FC00000 with the sign; -0 stays -0.
DSA_HD inline float e4m3_to_f32(std::uint8_t c) {
  const std::uint32_t sign = static_cast<std::uint32_t>(c & 0x80u) << 24;
  const std::uint32_t ef = (c >> 3) & 0xFu, mant = c & 7u;
  if ((c & 0x7Fu) == 0x7Fu) return from_bits32(sign | 0x7FC00000u);
  const float v = ef == 0 ? static_cast<float>(mant) * 0x1p-9f                              // subnormal, exact
                          : from_bits32(((ef + 120u) << 23) | (mant << 20));               // bias 7 -> 127
  return sign ? -v : v;
}

// f64 -> fp16 bits, one rounding to nearest even from the exact value (num::f64_to_fp16): overflow (|x| >= 65520
// after rounding) gives inf, NaN the canonical 0x7E00 with the sign, the sign of zero kept.
DSA_HD inline std::uint16_t f64_to_fp16(double x) {
  const std::uint64_t u = bits64(x);
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
