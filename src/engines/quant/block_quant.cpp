#include "engines/quant/block_quant.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"

namespace dsa::quant {

ScaleApply parse_scale_apply(const std::string& s) {
  if (s == "div") return ScaleApply::div;
  if (s == "mul_inv") return ScaleApply::mul_inv;
  throw std::invalid_argument("scale_apply must be div or mul_inv, found '" + s + "'");
}

namespace {

// The element loop with its options as template parameters: no control flow inside, so it vectorizes.
template <bool Mul, bool Clamp>
[[gnu::always_inline]] inline void encode_block(const float* x, std::int64_t n, float s, float inv, std::uint8_t* y) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    float v = Mul ? x[i] * inv : x[i] / s;
    if (Clamp) v = v < -448.0f ? -448.0f : (v > 448.0f ? 448.0f : v);  // NaN stays NaN (both compares false)
    y[i] = num::f32_to_e4m3(v);
  }
}

// The element loops compiled twice, AVX2 and baseline, picked at load time (same bits: integer and IEEE ops only).
__attribute__((target_clones("avx2", "default"))) void encode_any(bool mul, bool clamp, const float* x, std::int64_t n,
                                                                   float s, float inv, std::uint8_t* y) {
  if (mul) clamp ? encode_block<true, true>(x, n, s, inv, y) : encode_block<true, false>(x, n, s, inv, y);
  else clamp ? encode_block<false, true>(x, n, s, inv, y) : encode_block<false, false>(x, n, s, inv, y);
}

__attribute__((target_clones("avx2", "default"))) float block_amax(const float* x, std::int64_t n) {
  float amax = 0.0f;
  int nan = 0;
#pragma omp simd reduction(max : amax) reduction(| : nan)
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    nan |= a != a;
    amax = a > amax ? a : amax;  // exact: max of magnitudes (NaN handled by the flag)
  }
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

}  // namespace

__attribute__((target_clones("avx2", "default"))) void bf16_to_f32_row(const std::uint16_t* x, std::int64_t n, float* y) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) y[i] = num::bf16_to_f32(x[i]);
}

float quantize_block(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y) {
  // x / s == x * (1/s) bit for bit when s is a power of two whose reciprocal is exact: the div form then multiplies
  // (ue8m0 scales; a division per element costs 4x more). The CUDA kernels make the same choice (block_scale).
  const BlockScale b = block_scale(block_amax(x, n), p);
  encode_any(b.mul, p.clamp, x, n, b.s, b.inv, y);
  return b.s;
}

}  // namespace dsa::quant
