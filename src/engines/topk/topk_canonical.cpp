#include "engines/topk/topk_canonical.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace dsa::engines::topk {

std::vector<std::int64_t> topk_canonical(const double* scores, std::int64_t len, std::int64_t k) {
  std::vector<std::int64_t> pos(static_cast<std::size_t>(std::max<std::int64_t>(len, 0)));
  std::iota(pos.begin(), pos.end(), std::int64_t{0});
  auto cmp = [scores](std::int64_t a, std::int64_t b) { return topk_before(scores[a], a, scores[b], b); };
  const std::int64_t m = std::min(std::max<std::int64_t>(k, 0), len < 0 ? 0 : len);
  std::partial_sort(pos.begin(), pos.begin() + m, pos.end(), cmp);
  pos.resize(static_cast<std::size_t>(m));
  return pos;
}

std::vector<std::int64_t> topk_selection(const double* scores, std::int64_t len, std::int64_t k, bool fast_path) {
  if (!fast_path || len > k) return topk_canonical(scores, len, k);
  std::vector<std::int64_t> v(static_cast<std::size_t>(std::max<std::int64_t>(len, 0)));
  std::iota(v.begin(), v.end(), std::int64_t{0});
  return v;
}

double topk_last_score(const double* scores, std::int64_t len) {
  if (len <= 0) return -std::numeric_limits<double>::infinity();
  std::int64_t last = 0;
  for (std::int64_t p = 1; p < len; ++p)
    if (topk_before(scores[last], last, scores[p], p)) last = p;
  return scores[last];
}

}  // namespace dsa::engines::topk
