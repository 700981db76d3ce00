#include "layouts/indexer_kcache.hpp"

namespace dsa::layouts {

std::string IndexerKCache::describe(std::int64_t byte) const {
  const std::int64_t p = byte / page_bytes(), r = byte % page_bytes();
  if (r < page_size * head_dim)
    return "page " + std::to_string(p) + " token " + std::to_string(token_of_value(r)) + " dim " + std::to_string(dim_of_value(r));
  const std::int64_t s = r - page_size * head_dim;
  return "page " + std::to_string(p) + " token " + std::to_string(s / kScaleBytes) + " scale byte " + std::to_string(s % kScaleBytes);
}

const std::vector<std::string>& indexer_kcache_names() {
  static const std::vector<std::string> v{IndexerKCache::kName, IndexerKCache::kAiterRowMajorP1, IndexerKCache::kAiterPreshuffle};
  return v;
}

std::optional<KCacheOrder> indexer_kcache_order(const std::string& name) {
  if (name == IndexerKCache::kName || name == IndexerKCache::kAiterRowMajorP1) return KCacheOrder::planar;
  if (name == IndexerKCache::kAiterPreshuffle) return KCacheOrder::preshuffle16;
  return std::nullopt;
}

std::string indexer_kcache_requirement(const std::string& name, std::int64_t page_size, std::int64_t head_dim) {
  if (name == IndexerKCache::kAiterRowMajorP1 && page_size != 1) return "page_size 1 (aiter legacy path: 132-byte token records)";
  if (name == IndexerKCache::kAiterPreshuffle && (page_size % IndexerKCache::kTile != 0 || head_dim % IndexerKCache::kTile != 0))
    return "page_size and head_dim multiples of 16 (aiter MFMA 16x16 preshuffle)";
  return "";
}

Tensor indexer_kcache_to_planar(const Tensor& cache, KCacheOrder order) {
  if (order == KCacheOrder::planar) return cache;
  Tensor t = cache.clone();
  const IndexerKCacheView v = IndexerKCacheView::of(cache, order);
  IndexerKCache planar = v.layout;
  planar.order = KCacheOrder::planar;
  std::uint8_t* dst = t.data<std::uint8_t>();
  for (std::int64_t p = 0; p < v.num_pages; ++p)
    for (std::int64_t k = 0; k < planar.page_size; ++k) v.layout.load(v.base, p, k, dst + planar.value_offset(p, k));
  return t;
}

}  // namespace dsa::layouts
