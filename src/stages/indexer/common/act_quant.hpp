// act_quant: per-block fp8 e4m3fn quantization (spec v32 §2.5; fp32 variants §3.4/§3.6). Shared by the
// indexer.quant and indexer.prolog stages and the K-cache writer.
#pragma once
#include <cstdint>
#include <string>

#include "numerics/fp8_core.hpp"

namespace dsa::indexer {

// ue8m0 / fp32_div / fp32_mul: the indexer's act_quant (eps = amax clamp before the scale); pow2_div / fp32_floor:
// the MLA cache writers (eps applied after amax/448, see num::pow2_div_scale / num::fp32_scale_floor).
enum class ScaleFmt { ue8m0, fp32_div, fp32_mul, pow2_div, fp32_floor };  // the values of fp8core::Fmt
enum class ScaleApply { div, mul_inv };
ScaleFmt parse_scale_fmt(const std::string& s);    // "ue8m0" | "fp32_div" | "fp32_mul"
ScaleApply parse_scale_apply(const std::string& s);  // "div" | "mul_inv"

struct QuantParams {
  ScaleFmt fmt = ScaleFmt::ue8m0;
  ScaleApply apply = ScaleApply::div;
  float amax_eps = 1e-4f;
  bool clamp = true;  // clamp x/s to [-448, 448] before the e4m3 cast
};

// Quantizes one block of n fp32 values (exact bf16 values, typically). Writes n e4m3 codes; returns the scale.
// amax = max |x| (exact; NaN propagates), scale per `fmt`, y = e4m3(clamp(x/s)) or e4m3(clamp(fl32(x*fl32(1/s)))).
float quantize_block(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y);

// The same block quantization as one scalar loop (DSA_HD, numerics/fp8_core.hpp): the code that indexer.prolog's CPU
// reference and its CUDA backend share. Same operations as quantize_block, so the same bits.
DSA_HD inline float quantize_block_hd(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y) {
  const float s = fp8core::scale_of(static_cast<fp8core::Fmt>(p.fmt), fp8core::block_amax(x, n), p.amax_eps);
  const float inv = 1.0f / s;
  const bool mul = p.apply == ScaleApply::mul_inv || fp8core::exact_reciprocal(s, inv);
  for (std::int64_t i = 0; i < n; ++i) y[i] = fp8core::encode(x[i], mul, p.clamp, s, inv);
  return s;
}

// n bf16 bits -> fp32 (exact), vectorized.
void bf16_to_f32_row(const std::uint16_t* x, std::int64_t n, float* y);

}  // namespace dsa::indexer
