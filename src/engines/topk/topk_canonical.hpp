// Canonical top-k order (spec v32 §5): descending score, NaN ranked above +inf (as torch.topk does), equal
// scores (-0 == +0, NaN == NaN) by lower candidate position. A strict total order on (score, position), so the
// selection is unique and deterministic. Kernels emit any order and break ties arbitrarily: this order is
// canonical only, for reports and goldens; verdicts compare sets with a tie band.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace dsa::engines::topk {

// True when candidate (a, pa) comes before (b, pb) in the canonical order.
inline bool topk_before(double a, std::int64_t pa, double b, std::int64_t pb) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) return na && nb ? pa < pb : na;
  if (a != b) return a > b;
  return pa < pb;
}

// The first min(k, len) positions of scores[0..len) in canonical order.
std::vector<std::int64_t> topk_canonical(const double* scores, std::int64_t len, std::int64_t k);

// What a top-k kernel selects: the fast path's [0..len-1] when len <= k (fast_path), else topk_canonical.
std::vector<std::int64_t> topk_selection(const double* scores, std::int64_t len, std::int64_t k, bool fast_path);

// The candidate last in canonical order among scores[0..len) (the smallest; NaN only when all are NaN);
// -inf when len == 0. This is the k-th largest score tau when len <= k.
double topk_last_score(const double* scores, std::int64_t len);

}  // namespace dsa::engines::topk
