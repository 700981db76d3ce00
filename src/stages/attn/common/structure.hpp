// Input-structure findings shared by the sparse attention stages (notes on every result of the case, never verdicts):
// duplicate indices in a row and the kernels' shape requirements.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace dsa::attn {

// Rows of `idx` (viewed as [rows, K]) holding a valid index more than once (valid: v >= 0 and v < limit; limit < 0 =
// no upper limit). Returns "" or one line naming the first such row and the count.
std::string duplicate_rows(const Tensor& idx, std::int64_t K, std::int64_t limit, const char* kernel_rule);

}  // namespace dsa::attn
