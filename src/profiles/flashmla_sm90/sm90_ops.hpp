// The fp32 operations of FlashMLA's sm90 kernels as the emulations compute them (--use_fast_math: subnormal results
// flushed, .ftz), and the measured bf16 WGMMA k-step. Shared by the prefill and decode emulations.
#pragma once
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>

#include "numerics/formats.hpp"

namespace dsa::profiles::flashmla_emu::ops {

inline float ftz(float x) { return std::fabs(x) < FLT_MIN ? std::copysign(0.0f, x) : x; }
inline float mul(float a, float b) { return ftz(a * b); }
inline float add(float a, float b) { return ftz(a + b); }
inline float fma(float a, float b, float c) { return ftz(std::fma(a, b, c)); }
// cvt.rn.bf16.f32 (RNE) and back to its fp32 value.
inline std::uint16_t bf16(float x) { return num::f32_to_bf16(x); }
inline float bf16f(std::uint16_t b) { return num::bf16_to_f32(b); }
// A bf16 operand as the WGMMA model takes it: value = sig 2^(exp - 7), sig the signed 8-bit significand (|sig| in
// [128, 256)); sig = 0 for a zero.
struct Op {
  std::int32_t sig = 0, exp = 0;
};
inline Op op(double v) {
  if (v == 0) return {};
  const int e = std::ilogb(v);
  return {static_cast<std::int32_t>(std::ldexp(v, 7 - e)), e};
}

// One bf16 WGMMA k-step (m64nNk16: 16 products into the fp32 accumulator acc): products exact; the alignment
// exponent e is the largest ea + eb over the non-zero products and the accumulator's own exponent; every product
// and the accumulator are truncated toward zero to a multiple of 2^(e - 25); the sum is truncated toward zero to 24
// significant bits. In integers: at 2^(e - 25) a product is sig_a sig_b 2^(11 - d), d = e - ea - eb, the
// accumulator its 24-bit significand times 2^(2 - d) (shifts right truncate the magnitude); the sum (< 2^32) is cut
// to 24 bits. a / b: 16 contiguous operands.
double wgmma_k16(double acc, const Op* a, const Op* b);

}  // namespace dsa::profiles::flashmla_emu::ops
