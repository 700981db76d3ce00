// The paged indexer K cache (spec v32 §3.4): pages of `page_size` tokens; each page is PLANAR:
//   bytes [0, page_size*D)                 : fp8 e4m3fn values, token-major (token t, dim d at t*D + d)
//   bytes [page_size*D, page_size*(D+4))   : fp32 little-endian scales, token t at page_size*D + 4*t
// Shaped [num_pages, page_size, 1, D+4] uint8 by the engines, but the bytes are NOT 132-byte token records.
#pragma once
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "tensor/tensor.hpp"

namespace dsa::ref {

struct KCacheLayout {
  std::int64_t page_size = 64;
  std::int64_t head_dim = 128;
  std::int64_t page_bytes() const { return page_size * (head_dim + 4); }
  // Byte offsets inside the cache tensor for (page, token-in-page).
  std::int64_t value_offset(std::int64_t page, std::int64_t t) const { return page * page_bytes() + t * head_dim; }
  std::int64_t scale_offset(std::int64_t page, std::int64_t t) const {
    return page * page_bytes() + page_size * head_dim + 4 * t;
  }
  // Meaning of a byte offset: "page 17 token 5 dim 40" or "page 17 token 5 scale byte 2".
  std::string describe(std::int64_t byte) const {
    const std::int64_t p = byte / page_bytes(), r = byte % page_bytes();
    if (r < page_size * head_dim)
      return "page " + std::to_string(p) + " token " + std::to_string(r / head_dim) + " dim " + std::to_string(r % head_dim);
    const std::int64_t s = r - page_size * head_dim;
    return "page " + std::to_string(p) + " token " + std::to_string(s / 4) + " scale byte " + std::to_string(s % 4);
  }
};

// One token of the cache, decoded: where it lives, its fp8 codes and its fp32 scale.
struct KCacheToken {
  std::int64_t page = 0;
  std::int64_t offset = 0;               // token within the page
  const std::uint8_t* values = nullptr;  // head_dim e4m3fn codes
  float scale = 0.0f;
};

// Writes one token (head_dim e4m3 codes + the 4 raw bytes of its fp32 scale) into cache bytes `base`.
inline void kcache_store_token(std::uint8_t* base, const KCacheLayout& l, std::int64_t page, std::int64_t t,
                               const std::uint8_t* values, const void* scale_bytes) {
  std::memcpy(base + l.value_offset(page, t), values, static_cast<std::size_t>(l.head_dim));
  std::memcpy(base + l.scale_offset(page, t), scale_bytes, 4);  // raw bits: NaN payloads survive
}

// Read access to a cache tensor u8 [P, page_size, 1, D+4].
struct KCacheView {
  const std::uint8_t* base = nullptr;
  KCacheLayout layout;
  std::int64_t num_pages = 0;
  static KCacheView of(const Tensor& cache) {
    KCacheView v;
    v.base = cache.data<std::uint8_t>();
    v.num_pages = cache.dim(0);
    v.layout.page_size = cache.dim(1);
    v.layout.head_dim = cache.dim(3) - 4;
    return v;
  }
  const std::uint8_t* values(std::int64_t page, std::int64_t t) const { return base + layout.value_offset(page, t); }
  float scale(std::int64_t page, std::int64_t t) const {
    float s;
    std::memcpy(&s, base + layout.scale_offset(page, t), 4);  // little-endian host assumed (x86-64, aarch64)
    return s;
  }
  // Token at (page, t); throws std::out_of_range naming the page/token when outside the cache.
  KCacheToken at(std::int64_t page, std::int64_t t) const {
    if (page < 0 || page >= num_pages || t < 0 || t >= layout.page_size)
      throw std::out_of_range("K cache: page " + std::to_string(page) + " token " + std::to_string(t) +
                              " outside " + std::to_string(num_pages) + " pages of " + std::to_string(layout.page_size) + " tokens");
    return {page, t, values(page, t), scale(page, t)};
  }
  // Token at a physical slot page*page_size + offset (slot_mapping, FlashMLA indices_in_kvcache).
  KCacheToken at_slot(std::int64_t slot) const {
    if (slot < 0) throw std::out_of_range("K cache: negative slot " + std::to_string(slot));
    return at(slot / layout.page_size, slot % layout.page_size);
  }
  // Logical token j of a request whose block-table row is bt[0..nblocks): page bt[j/page_size], offset j%page_size.
  KCacheToken at_logical(const std::int32_t* bt, std::int64_t nblocks, std::int64_t j) const {
    if (j < 0 || j / layout.page_size >= nblocks)
      throw std::out_of_range("K cache: logical token " + std::to_string(j) + " outside the block table (" +
                              std::to_string(nblocks) + " blocks)");
    return at(bt[j / layout.page_size], j % layout.page_size);
  }
};

}  // namespace dsa::ref
