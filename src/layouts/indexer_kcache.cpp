#include "layouts/indexer_kcache.hpp"

namespace dsa::layouts {

std::string IndexerKCache::describe(std::int64_t byte) const {
  const std::int64_t p = byte / page_bytes(), r = byte % page_bytes();
  if (r < page_size * head_dim)
    return "page " + std::to_string(p) + " token " + std::to_string(r / head_dim) + " dim " + std::to_string(r % head_dim);
  const std::int64_t s = r - page_size * head_dim;
  return "page " + std::to_string(p) + " token " + std::to_string(s / kScaleBytes) + " scale byte " + std::to_string(s % kScaleBytes);
}

}  // namespace dsa::layouts
