// `dsa-check inspect`: cases, stage, every tensor with shape, dtype, statistics, and the schema validation result.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "tensor/tensor.hpp"

namespace dsa {

struct TensorStats {
  std::int64_t numel = 0, nan = 0, pos_inf = 0, neg_inf = 0, finite = 0;
  double min = 0, max = 0, mean = 0;  // over finite elements (0 when none)
};
TensorStats tensor_stats(const Tensor& t);

// Returns the exit code: 0 when every file is valid, 2 when any I/O or schema problem was found.
int run_inspect(const std::vector<std::string>& files, std::ostream& out, std::ostream& err, nlohmann::json* json_out);

}  // namespace dsa
