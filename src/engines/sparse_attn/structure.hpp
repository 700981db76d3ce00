// Input-structure findings shared by the sparse attention stages (notes on every result of the case, never verdicts):
// duplicate indices in a row and the kernels' shape requirements.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/case.hpp"
#include "tensor/tensor.hpp"

namespace dsa::attn {

// Rows of `idx` (viewed as [rows, K]) holding a valid index more than once (valid: v >= 0 and v < limit; limit < 0 =
// no upper limit). Returns "" or one line naming the first such row and the count.
std::string duplicate_rows(const Tensor& idx, std::int64_t K, std::int64_t limit, const char* kernel_rule);

// topk_length (optional input): every entry in [0, K]; `unit` names what an entry belongs to ("row", "batch").
void check_topk_length(const Case& c, std::int64_t K, const char* unit, std::vector<Problem>& p);

// The largest number of entries of a row of `idx` (viewed as [rows, K]) that `valid` accepts: the longest key list
// the reference will hold for one row (its workspace).
template <class Pred>
std::int64_t longest_row(const Tensor& idx, std::int64_t K, Pred valid) {
  std::int64_t nmax = 0;
  for (std::int64_t i = 0; K > 0 && i < idx.numel() / K; ++i) {
    std::int64_t n = 0;
    for (std::int64_t pp = 0; pp < K; ++pp) n += valid(idx.int_at(i * K + pp)) ? 1 : 0;
    nmax = n > nmax ? n : nmax;
  }
  return nmax;
}

}  // namespace dsa::attn
