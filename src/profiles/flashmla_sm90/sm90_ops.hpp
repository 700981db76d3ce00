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
inline int expo(double x) { return x == 0 ? INT_MIN : std::ilogb(x); }

// One bf16 WGMMA k-step (m64nNk16: 16 products into the fp32 accumulator), exact in double: products exact; the
// alignment exponent e is the largest ea + eb over the non-zero products and the accumulator's own exponent; every
// product and the accumulator are truncated toward zero to a multiple of 2^(e - 25); the sum is truncated toward
// zero to 24 significant bits. a / b: the factors (bf16 values) at strides sa / sb, ea / eb their exponents (expo).
double wgmma_k16(double acc, const double* a, const int* ea, std::int64_t sa, const double* b, const int* eb, std::int64_t sb);

}  // namespace dsa::profiles::flashmla_emu::ops
