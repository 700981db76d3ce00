#include "layouts/mla_kcache.hpp"

namespace dsa::layouts {

std::string MlaKCache::describe(std::int64_t byte) const {
  const std::int64_t tok = byte / kRecord, r = byte % kRecord;
  std::string s = "page " + std::to_string(tok / page_size) + " token " + std::to_string(tok % page_size) + " ";
  if (r < kScaleOff) return s + "dim " + std::to_string(r) + " (fp8 code, scale tile " + std::to_string(r / kTile) + ")";
  if (r < kRopeOff) return s + "scale tile " + std::to_string((r - kScaleOff) / 4) + " byte " + std::to_string((r - kScaleOff) % 4);
  return s + "rope dim " + std::to_string((r - kRopeOff) / 2) + " byte " + std::to_string((r - kRopeOff) % 2);
}

}  // namespace dsa::layouts
