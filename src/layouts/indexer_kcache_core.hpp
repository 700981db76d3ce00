// The byte offsets of the indexer K-cache layouts (layouts/indexer_kcache.hpp) as plain host/device functions: the
// one definition the host layout type and the CUDA cache writer share. Plain C++17, no project includes but DSA_HD.
#pragma once
#include <cstdint>

#include "numerics/fp8_core.hpp"

namespace dsa::layouts::kcache_core {

constexpr std::int64_t kScaleBytes = 4;
constexpr std::int64_t kTile = 16;

DSA_HD inline std::int64_t page_bytes(std::int64_t ps, std::int64_t D) { return ps * (D + kScaleBytes); }
// Token t (in its page), dim d: planar t*D + d; preshuffle16 (t/16)*16*D + (d/16)*256 + (t%16)*16 + d%16.
DSA_HD inline std::int64_t value_offset(std::int64_t page, std::int64_t t, std::int64_t d, std::int64_t ps, std::int64_t D,
                                        bool preshuffle16) {
  if (!preshuffle16) return page * page_bytes(ps, D) + t * D + d;
  return page * page_bytes(ps, D) + (t / kTile) * kTile * D + (d / kTile) * kTile * kTile + (t % kTile) * kTile + d % kTile;
}
DSA_HD inline std::int64_t scale_offset(std::int64_t page, std::int64_t t, std::int64_t ps, std::int64_t D) {
  return page * page_bytes(ps, D) + ps * D + kScaleBytes * t;
}

}  // namespace dsa::layouts::kcache_core
