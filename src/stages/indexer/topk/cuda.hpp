// indexer.topk's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure. The canonical selection of every row on the device (engines::topk::topk_canonical.hpp's order).
#pragma once
#include <cstdint>

namespace dsa::indexer::topk {

// scores [R, C]: the logits widened exactly to fp32 (fp32, bf16 and fp16 all are); row r's candidates are positions
// q < len[r] with score scores[r, start[r] + q], the first num_init and last num_local forced to +inf.
// sel [R, k]: the first min(k, len) positions in canonical order, -1 after; last [R]: the canonical-last position of
// the row (its smallest score; -1 when len is 0).
void select_cuda(const float* scores, std::int64_t R, std::int64_t C, const std::int64_t* start, const std::int64_t* len, std::int64_t k,
                 std::int64_t num_init, std::int64_t num_local, std::int32_t* sel, std::int32_t* last);

}  // namespace dsa::indexer::topk
