// The DeepSeek-V4 compressor's shared arithmetic (spec v4 §2.2-§2.4, §10): the per-channel gated pool of one
// compressed entry's window rows and the RMSNorm + RoPE after it, in fp64 with rigorous bounds. Used by v4.compressor
// (Ascend TND op) and v4.compressor_cache (vLLM's CUDA kernels writing the paged caches).
#pragma once
#include <cstdint>
#include <vector>

namespace dsa::engines::v4_compress {

// One window row: kv, score over the coff*D channels (values and bounds), or missing (weight 0: kv 0, score -inf).
struct RowRef {
  const double* kv = nullptr;
  const double* s = nullptr;
  const double* ekv = nullptr;
  const double* es = nullptr;
  bool missing = false;
  bool current = true;  // coff = 2: b-half [D, 2D) (current group) or a-half [0, D) (previous group)
};

// Known bugs of the pool the selftests reproduce (never set by a dump).
enum class PoolBug { none, halves_swapped, prev_not_masked, softmax_over_channels };

// C[c] = sum_rows softmax_rows(S[., c]) KV[., c] for the D output channels, with bounds eC: the row inputs' bounds
// (a score bound es perturbs the weights by e^(2 es) - 1) plus the fp32 evaluation 2^-20 + 2 gamma(rows) of sum w|kv|.
// A NaN or an infinite max score gives NaN.
void pool(std::int64_t D, std::int64_t coff, const std::vector<RowRef>& rows, PoolBug bug, double* C, double* eC);

// y = C / sqrt(mean C^2 + eps) * gamma, then interleaved RoPE of the last `rope` dims (cos_row / sin_row: one value
// per rope dim, pairs duplicated), exact in fp64 with the bound ey of an fp32 kernel (rsqrt or divide form);
// round_pooled: C to bf16 before the norm (the DeepSeek reference; V4.1's ratio-1 bf16 Linear); round_normed: y to
// bf16 after the norm (the reference's bf16 RMSNorm output).
void norm_rope(std::int64_t D, std::int64_t rope, double eps, bool round_pooled, bool round_normed, const double* C, const double* eC,
               const std::uint16_t* gamma_bf16, const float* cos_row, const float* sin_row, double* y, double* ey);

}  // namespace dsa::engines::v4_compress
