// Vectorized dequantization loops of the caches' hot paths: explicit AVX-512F / AVX2 loops (the code's value by bit
// placement, no table lookup) picked at run time, and for the tails the scalar definition in target_clones builds
// (AVX-512, AVX2, baseline); the operations are exact or one rounding each, so every path gives the same bits.
#pragma once
#include <cstdint>

namespace dsa::num {

// out[i] = double(round_to_bf16(e4m3_to_f32(codes[i]) * s)) for i < n: the bf16 value of a tile's fp8 code times its
// fp32 scale (one fp32 product, one RNE rounding to bf16; NaN -> the canonical NaN with its sign), as FlashMLA's
// dequantizing loaders compute it.
// path: -1 the best this CPU runs; 2 AVX-512F, 1 AVX2, 0 the scalar definition alone (a path above the best runs the
// best; tests compare the paths). e4m3_scale_paths(): the best path of this CPU.
void e4m3_times_scale_bf16(const std::uint8_t* codes, std::int64_t n, float s, double* out, int path = -1);
int e4m3_scale_paths();

// out[i] = double(bf16 bits[i]) for i < n (exact; a NaN's payload as the scalar conversion keeps it), and
// acc[i] += |x[i]| for i < n (one rounding each, per element in order): vectorized for this CPU (target clones).
void bf16_to_f64_n(const std::uint16_t* bits, std::int64_t n, double* out);
void add_abs_n(const double* x, std::int64_t n, double* acc);

}  // namespace dsa::num
