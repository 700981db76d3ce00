// v41.select's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure. Every row's candidates (or blocks) and their canonical order on the device (engines/topk's order: NaN
// first, descending score with -0 == +0, ties by the lower id), the pieces of core.hpp shared with cpu.cpp.
#pragma once
#include <cstdint>
#include <vector>

namespace dsa::v41::select {

struct CudaSelectJob {
  std::int64_t S = 0, N = 0, M = 0, bs = 8, k = 0;
  bool blocks = false;       // the published blocks (publish = 1) instead of the positions
  bool cand_layout = false;  // scores_layout candidates
  bool short_ref = false;    // short_rows = ref
  const float* scores = nullptr;         // [S, N], widened exactly from the dump's dtype
  const std::int64_t* reach = nullptr;   // [S]
  const std::int32_t* cand = nullptr;    // [S, M] or null (not a consumer)
};

// ids [S, w] with w = min(k, the widest row's items) (returned): each row's first min(k, len) ids (positions, block
// ids, or for a consumer's scores_layout candidates without the REF quirk list entries e * block_size + t) in
// canonical order, -1 after; len [S]: the row's candidate count.
std::int64_t select_cuda(const CudaSelectJob& job, std::vector<std::int64_t>& ids, std::vector<std::int64_t>& len);

}  // namespace dsa::v41::select
