// Vectorized dequantization loops of the caches' hot paths (target_clones: AVX-512, AVX2 and baseline builds of the
// same scalar definition, picked at load time; the operations are exact or one rounding each, so every build gives the
// same bits).
#pragma once
#include <cstdint>

namespace dsa::num {

// out[i] = double(round_to_bf16(e4m3_to_f32(codes[i]) * s)) for i < n: the bf16 value of a tile's fp8 code times its
// fp32 scale (one fp32 product, one RNE rounding to bf16; NaN -> the canonical NaN with its sign), as FlashMLA's
// dequantizing loaders compute it.
void e4m3_times_scale_bf16(const std::uint8_t* codes, std::int64_t n, float s, double* out);

}  // namespace dsa::num
