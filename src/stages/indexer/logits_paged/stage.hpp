// indexer.logits_paged — DeepGEMM fp8_paged_mqa_logits (spec v32 §3.3-§3.5): decode/MTP logits of query row
// r = b*next_n + t against the keys of request b, read from the paged cache (attr layout: indexer_kcache_planar,
// aiter_rowmajor_p1 or aiter_preshuffle) through block_table; the same per-logit arithmetic as indexer.logits_ragged (engines/logits/logits_engine.hpp).
#pragma once
#include <algorithm>

#include "layouts/indexer_kcache.hpp"
#include "stage/stage.hpp"

namespace dsa::engines::logits {
struct LogitsTensors;
}

namespace dsa::indexer::logits_paged {

struct Params : dsa::Params {
  bool clean_logits = false;          // columns past the row's causal length are -inf (else undefined)
  std::int64_t max_context_len = 0;   // number of logits columns
  bool bf16 = false;                  // logits_dtype
  layouts::KCacheOrder order = layouts::KCacheOrder::planar;  // attr layout (the cache's byte layout)
  bool torch = false;            // attr kernel = vllm-torch: judged by its derived bound (engines/logits/torch_logits_core.hpp)
  std::string tolerance_policy() const override { return torch ? "" : bf16 ? "bf16-logits" : ""; }
};

// Valid columns [0, n) of row (b, t): 2-D context_lens give n = L[b,t]; 1-D give the causal MTP rule
// n = L[b] - next_n + t + 1; clamped to the columns and to the block table's reach.
inline std::int64_t valid_columns(const std::int32_t* cl, bool two_d, std::int64_t b, std::int64_t t, std::int64_t next_n,
                                  std::int64_t cols, std::int64_t reach) {
  const std::int64_t n = two_d ? cl[b * next_n + t] : cl[b] - next_n + t + 1;
  return std::clamp<std::int64_t>(n, 0, std::min(cols, reach));
}

// The stage's inputs (q, kv_cache, weights, context_lens, block_table): also indexer.fused's.
std::vector<TensorSpec> input_schema();
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
// The Expected of computed logits tensors (rows [opt.row_begin, row_end)): the bounded RefTensor, the deepgemm-sm90
// emulation when the case's kernel asks for it (computed on the host for every backend) and the coordinate names.
Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const engines::logits::LogitsTensors& lt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the exact logits on the GPU
#endif
std::vector<golden::Generator> generators();
// The logits.paged_mtp generator (golden.cpp): also the input generator of indexer.fused.
void generate_paged(const golden::GoldenSpec& s, std::uint64_t seed, int threads, Case& c);
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::logits_paged
