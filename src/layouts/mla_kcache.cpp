#include "layouts/mla_kcache.hpp"

#include <vector>

namespace dsa::layouts {

std::string MlaKCache::describe(std::int64_t byte) const {
  const std::int64_t tok = byte / kRecord, r = byte % kRecord;
  std::string s = "page " + std::to_string(tok / page_size) + " token " + std::to_string(tok % page_size) + " ";
  if (r < kScaleOff) return s + "dim " + std::to_string(r) + " (fp8 code, scale tile " + std::to_string(r / kTile) + ")";
  if (r < kRopeOff) return s + "scale tile " + std::to_string((r - kScaleOff) / 4) + " byte " + std::to_string((r - kScaleOff) % 4);
  return s + "rope dim " + std::to_string((r - kRopeOff) / 2) + " byte " + std::to_string((r - kRopeOff) % 2);
}

std::string Model1KCache::describe(std::int64_t byte) const {
  const std::int64_t blk = page_size * kRecord, page = byte / blk, r = byte % blk;
  std::string s = "page " + std::to_string(page) + " token ";
  if (r < page_size * kToken) {
    const std::int64_t tok = r / kToken, b = r % kToken;
    s += std::to_string(tok) + " ";
    if (b < kNope) return s + "dim " + std::to_string(b) + " (fp8 code, scale tile " + std::to_string(b / kTile) + ")";
    return s + "rope dim " + std::to_string((b - kNope) / 2) + " byte " + std::to_string((b - kNope) % 2);
  }
  const std::int64_t q = r - page_size * kToken, tok = q / kScaleRec, b = q % kScaleRec;
  s += std::to_string(tok) + " ";
  return b < kTiles ? s + "scale tile " + std::to_string(b) + " (e8m0)" : s + "scale pad byte";
}

namespace {
void model1_relayout(std::uint8_t* block, std::int64_t ps, bool to_aos) {
  using M = Model1KCache;
  std::vector<std::uint8_t> b(static_cast<std::size_t>(ps * M::kRecord));
  for (std::int64_t t = 0; t < ps; ++t) {
    const std::int64_t split_tok = t * M::kToken, split_sc = ps * M::kToken + t * M::kScaleRec, aos = t * M::kRecord;
    std::uint8_t* dst = b.data();
    if (to_aos) {
      std::memcpy(dst + aos, block + split_tok, M::kToken);
      std::memcpy(dst + aos + M::kToken, block + split_sc, M::kScaleRec);
    } else {
      std::memcpy(dst + split_tok, block + aos, M::kToken);
      std::memcpy(dst + split_sc, block + aos + M::kToken, M::kScaleRec);
    }
  }
  std::memcpy(block, b.data(), b.size());
}
}  // namespace

void model1_split_to_aos(std::uint8_t* block, std::int64_t page_size) { model1_relayout(block, page_size, true); }
void model1_aos_to_split(std::uint8_t* block, std::int64_t page_size) { model1_relayout(block, page_size, false); }

}  // namespace dsa::layouts
