// bf16 / fp16 conversions as DSA_HD functions: the stages whose cpu.cpp and cuda.cu share scalar math call these
// (architecture.md, determinism contract way 3). Integer bit manipulation plus IEEE operations that are exact, so the
// host and the device give the same bits. The rules are formats.hpp's (one RNE rounding from the exact input,
// subnormals kept, overflow to inf, NaN to the canonical quiet NaN with the input's sign); f32_to_bf16 is the
// definition num::f32_to_bf16 uses, and tests/cpp/test_numerics.cpp checks f64_to_bf16 / f32_to_fp16 bit for bit
// against formats.cpp's generic encoder (num::f64_to_bf16, num::f64_to_fp16).
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/hd.hpp"

namespace dsa::halfcore {

DSA_HD inline std::uint32_t bits32(float x) {
  std::uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
DSA_HD inline float from_bits32(std::uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
DSA_HD inline std::uint64_t bits64(double x) {
  std::uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
DSA_HD inline double from_bits64(std::uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

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

}  // namespace dsa::halfcore
