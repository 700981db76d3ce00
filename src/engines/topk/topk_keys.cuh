// The canonical order of engines/topk/topk_canonical.hpp (NaN first, then descending score with -0 == +0, ties by
// the lower id) as unique 64-bit keys whose ascending order it is, for the CUDA top-k paths (indexer.topk,
// v41.select):
//   high 32 bits: 0 for NaN, else ~m(score) where m is the usual order-preserving map of the fp32 bits
//   low 32 bits:  the id
// Keys are unique, so any sort gives the same result; rows are segments of one CUB segmented sort (sort_segments).
#pragma once
#include <cstdint>
#include <cstring>

namespace dsa::engines::topk {

__device__ inline std::uint64_t canonical_key(float x, std::uint32_t id) {
  std::uint32_t u;
  memcpy(&u, &x, 4);
  std::uint32_t hi;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) {
    hi = 0;  // NaN ranks first
  } else {
    if (u == 0x80000000u) u = 0;  // -0 == +0
    const std::uint32_t m = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending in the float value
    hi = ~m;                                                              // descending; +inf -> 0x007FFFFF > 0
  }
  return (static_cast<std::uint64_t>(hi) << 32) | static_cast<std::uint64_t>(id);
}

// Sorts the n device keys `in` into `out`, segment s = [beg[s], end[s]) (device arrays of `segs` offsets), ascending.
void sort_segments(const std::uint64_t* in, std::uint64_t* out, std::int64_t n, std::int64_t segs, const std::int64_t* beg,
                   const std::int64_t* end);

}  // namespace dsa::engines::topk
