// The block quantizer on the CPU: quant_core.hpp's steps with the element loops vectorized (same bits), and the
// attr values that name its options. act_quant of spec v32 §2.5 (fp32 variants §3.4/§3.6) and the MLA cache writers.
#pragma once
#include <cstdint>
#include <string>

#include "engines/quant/quant_core.hpp"

namespace dsa::quant {

ScaleApply parse_scale_apply(const std::string& s);  // "div" | "mul_inv"

// Quantizes one block of n fp32 values (exact bf16 values, typically). Writes n e4m3 codes; returns the scale.
// amax = max |x| (exact; NaN propagates), scale per `fmt`, y = e4m3(clamp(x/s)) or e4m3(clamp(fl32(x*fl32(1/s)))).
float quantize_block(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y);

// n bf16 bits -> fp32 (exact), vectorized.
void bf16_to_f32_row(const std::uint16_t* x, std::int64_t n, float* y);

}  // namespace dsa::quant
