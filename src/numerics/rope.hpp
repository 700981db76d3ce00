// RoPE for the indexer prolog (spec v32 §2.2): rotation of the leading rope_dim dims of a bf16 vector in fp32,
// NeoX pairs (x[i], x[i+rope_dim/2]) or interleaved pairs (x[2i], x[2i+1]); YaRN frequency tables as the demo's
// precompute_freqs_cis builds them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "numerics/half_core.hpp"

namespace dsa::num {

enum class RopeLayout { neox, interleaved };
RopeLayout parse_rope_layout(const std::string& s);  // "neox" | "interleaved"

struct YarnParams {
  std::int64_t rope_dim = 64;
  double theta = 10000.0;
  double factor = 40.0;
  std::int64_t original_seq_len = 4096;
  std::int64_t max_seq_len = 16384;  // YaRN correction active when max_seq_len > original_seq_len
  double beta_fast = 32.0;
  double beta_slow = 1.0;
};

// Per-pair frequencies f_i' (i < rope_dim/2), following the demo's fp32 tensor ops one rounding per op:
//   e_i = fl32(2i / dim); f_i = fl32(1 / fl32(theta ** e_i));
//   YaRN (max_seq_len > original_seq_len): low/high from the double-precision correction range (clamped to
//   [0, dim-1]; high += 0.001 when equal), ramp_i = clamp(fl32(fl32(i - low) / fl32(high - low)), 0, 1),
//   smooth_i = fl32(1 - ramp_i), f_i' = fl32(fl32(fl32(f_i / factor) * fl32(1 - smooth_i)) + fl32(f_i * smooth_i)).
// The transcendental pow is evaluated in double and rounded once to fp32 (deterministic here; the demo runs
// torch's fp32 powf on CUDA, which may differ by an ulp).
std::vector<float> yarn_inv_freqs(const YarnParams& p);

// cos/sin of theta_i = fl32(fl32(pos) * f_i') for one position: cos and sin are evaluated in double from the
// fp32 angle and rounded once to fp32. The demo's torch.polar runs CUDA cosf/sinf, which may differ by ~1 ulp
// (after the bf16 cast of the rotated values this almost never shows; dump the table for bit-exactness).
void yarn_cos_sin(const std::vector<float>& inv_freqs, std::int64_t pos, float* cos_out, float* sin_out);

// The rope row (interleave-duplicated cos/sin, `rope` dims) of position pos of DeepSeek-V4's compressed layers (YaRN,
// base 160000, factor 16, original 65536, beta 32/1), as the V4 generators build the compressor_metadata gather.
void v4_rope_row(std::int64_t rope, std::int64_t pos, float* cos_out, float* sin_out);
// vLLM's cos_sin_cache of those rows, positions 0 .. rows - 1: row p = cos [rope/2] | sin [rope/2] (out [rows, rope]).
void v4_cos_sin_cache(std::int64_t rope, std::int64_t rows, float* out);

// Rotates x[0..rope_dim) (fp32 values, exact bf16 in the prolog) in place with cos/sin[rope_dim/2]:
//   out_a = fl32(fl32(x_a*c) - fl32(x_b*s)),  out_b = fl32(fl32(x_a*s) + fl32(x_b*c)),
// pairs (a, b) = (i, i + rope_dim/2) for neox, (2i, 2i+1) for interleaved; then rounds every rotated value to
// bf16 (the `.to(bf16)` of apply_rotary_emb). Non-fused fp32 products: the complex64 multiply of the demo
// without FMA contraction (an FMA-contracting GPU build may differ by 1 fp32 ulp before the bf16 cast).
// DSA_HD: the CPU reference and the CUDA backend run this one definition.
DSA_HD inline void apply_rope_bf16(float* x, const float* cos_v, const float* sin_v, std::int64_t rope_dim, RopeLayout layout) {
  const std::int64_t half = rope_dim / 2;
  for (std::int64_t i = 0; i < half; ++i) {
    const std::int64_t ia = layout == RopeLayout::neox ? i : 2 * i;
    const std::int64_t ib = layout == RopeLayout::neox ? i + half : 2 * i + 1;
    const float a = x[ia], b = x[ib], c = cos_v[i], s = sin_v[i];
    const float ac = a * c, bs = b * s, as = a * s, bc = b * c;  // each product rounded to fp32
    x[ia] = halfcore::round_to_bf16(ac - bs);
    x[ib] = halfcore::round_to_bf16(as + bc);
  }
}

}  // namespace dsa::num
