// The cache as a kernel that mistakes the planar page layout for (D+4)-byte token records would see it (B5): the
// bytes at token record k are moved to where the planar layout keeps token k. Used by the K-cache mutants.
#pragma once
#include <cstring>

#include "layouts/indexer_kcache.hpp"

namespace dsa::layouts {

inline Tensor misread_as_token_records(const Tensor& cache) {
  Tensor t = cache.clone();
  const auto v = layouts::IndexerKCacheView::of(cache);
  const auto& L = v.layout;
  const std::uint8_t* src = cache.data<std::uint8_t>();
  std::uint8_t* dst = t.data<std::uint8_t>();
  for (std::int64_t p = 0; p < v.num_pages; ++p)
    for (std::int64_t k = 0; k < L.page_size; ++k) {
      const std::int64_t rec = p * L.page_bytes() + k * layouts::IndexerKCache::record_bytes(L.head_dim);
      std::memcpy(dst + L.value_offset(p, k), src + rec, static_cast<std::size_t>(L.head_dim));
      std::memcpy(dst + L.scale_offset(p, k), src + rec + L.head_dim, layouts::IndexerKCache::kScaleBytes);
    }
  return t;
}

}  // namespace dsa::layouts
