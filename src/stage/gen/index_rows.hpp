// Shared pieces of the sparse attention generators (prefill and decode golden.cpp): index rows with the adversarial
// patterns of real bugs (B32 leading invalid chunks, B34 aliased poison, duplicates, lonely rows), sinks, topk_length.
#pragma once
#include <cstdint>
#include <vector>

#include "numerics/rng.hpp"
#include "stage/golden_spec.hpp"
#include "tensor/tensor.hpp"

namespace dsa::gen {

// Index rows [rows, K] over candidates [0, N) (distinct unless duplicated on purpose). Params read from the spec:
//   invalid_frac  fraction of positions set to -1 (scattered)          oob_frac  positions >= N (prefill: invalid)
//   dup_frac      positions repeating an earlier valid index of the row  lonely_every  every n-th row all -1
//   leading_invalid  every other row starts with a full 64-wide -1 chunk (B32)
//   tie_pairs     > 0: the row's first valid index is repeated by a *different* key with equal content (set by caller)
// `pick(row, j)` maps the j-th drawn candidate (0 <= j < N) to the emitted index (identity for prefill, the cache
// slot for decode).
std::vector<std::int64_t> index_rows(const golden::GoldenSpec& s, const Rng& root, std::int64_t rows, std::int64_t K,
                                     std::int64_t N, std::int64_t oob_base);
// topk_length per entry (n entries): random in [0, K] with 0 and K present when param topk_length = 1; empty = absent.
std::vector<std::int64_t> topk_lengths(const golden::GoldenSpec& s, const Rng& root, std::int64_t n, std::int64_t K);
// attn_sink [H] when param sink > 0: N(0, sink), heads 0/1 at +-sink_large (param, default 95: the B35 large-sink heads).
bool sinks(const golden::GoldenSpec& s, const Rng& root, std::int64_t H, Tensor& out);
// bf16 N(0, sigma) values into `dst` (n values) from one stream.
void bf16_normal(Rng& rng, double sigma, std::int64_t n, std::uint16_t* dst);
Tensor to_tensor(const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape);  // i32

}  // namespace dsa::gen
