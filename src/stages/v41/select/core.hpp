// v41.select: the per-row pieces cpu.cpp and cuda.cu share (determinism contract, way 1: comparisons of the given
// scores only): where a block sits in a row's candidate list, and a block's score. Plain C++17 with DSA_HD only.
#pragma once
#include <cstdint>

#include "numerics/hd_ops.hpp"

namespace dsa::v41::select::core {

// The entry of block b in a candidate list (strictly increasing ids >= 0, then -1 padding: parse checks it), or -1.
DSA_HD inline std::int64_t entry_of(const std::int32_t* list, std::int64_t M, std::int64_t b) {
  std::int64_t lo = 0, hi = M;
  while (lo < hi) {  // the first entry that is padding or >= b
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (list[mid] < 0 || list[mid] >= b) hi = mid;
    else lo = mid + 1;
  }
  return lo < M && list[lo] == b ? lo : -1;
}

// The score of block b of a row reaching n positions (scores x[0..n)): the max over its positions, NaN if any is NaN
// (torch.max propagates it), +inf for the newest block (the one of position n - 1: pinned). -inf: dropped.
template <typename Get>
DSA_HD inline double block_score(Get x, std::int64_t n, std::int64_t bs, std::int64_t b) {
  const double inf = hd::inf64();
  if (b == (n + bs - 1) / bs - 1) return inf;
  double m = -inf;
  const std::int64_t end = (b + 1) * bs < n ? (b + 1) * bs : n;
  for (std::int64_t j = b * bs; j < end; ++j) {
    const double v = x(j);
    if (v != v || v > m) m = m != m ? m : v;
  }
  return m;
}

}  // namespace dsa::v41::select::core
