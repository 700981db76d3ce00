#include "engines/sparse_attn/structure.hpp"

#include <algorithm>

namespace dsa::attn {

std::string duplicate_rows(const Tensor& idx, std::int64_t K, std::int64_t limit, const char* kernel_rule) {
  if (K <= 0) return "";
  const std::int64_t rows = idx.numel() / K;
  std::int64_t bad = 0, first = -1, first_v = 0;
  std::vector<std::int64_t> v;
  for (std::int64_t r = 0; r < rows; ++r) {
    v.clear();
    for (std::int64_t p = 0; p < K; ++p) {
      const std::int64_t x = idx.int_at(r * K + p);
      if (x >= 0 && (limit < 0 || x < limit)) v.push_back(x);
    }
    std::sort(v.begin(), v.end());
    const auto it = std::adjacent_find(v.begin(), v.end());
    if (it == v.end()) continue;
    if (first < 0) first = r, first_v = *it;
    ++bad;
  }
  if (!bad) return "";
  return std::to_string(bad) + " index row(s) name a key more than once (first: row " + std::to_string(first) + ", index " +
         std::to_string(first_v) + "); " + kernel_rule + " A top-k producer should never emit duplicates.";
}

void check_topk_length(const Case& c, std::int64_t K, const char* unit, std::vector<Problem>& p) {
  const Tensor* tl = c.input_opt("topk_length");
  for (std::int64_t i = 0; tl && i < tl->numel(); ++i)
    if (tl->int_at(i) < 0 || tl->int_at(i) > K) {
      p.push_back({c.file, c.name, "inputs/topk_length", "0 <= topk_length <= topk = " + std::to_string(K),
                   std::string(unit) + " " + std::to_string(i) + ": " + std::to_string(tl->int_at(i))});
      return;
    }
}

}  // namespace dsa::attn
