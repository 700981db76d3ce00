// indexer.quant's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a
// CUDA failure. x is bf16 bits (x_bf16) or fp32 (x_f32) [T, K]; y [T, K] e4m3 codes, scale [T, K / bs].
#pragma once
#include <cstdint>

#include "engines/quant/quant_core.hpp"

namespace dsa::indexer::quant {

void quant_rows_cuda(const std::uint16_t* x_bf16, const float* x_f32, std::int64_t T, std::int64_t K, std::int64_t bs,
                     const dsa::quant::QuantParams& q, std::uint8_t* y, float* scale);

}  // namespace dsa::indexer::quant
