// The paged indexer K cache (spec v32 §3.4): pages of `page_size` tokens; each page is PLANAR:
//   bytes [0, page_size*D)                 : fp8 e4m3fn values, token-major (token t, dim d at t*D + d)
//   bytes [page_size*D, page_size*(D+4))   : fp32 little-endian scales, token t at page_size*D + 4*t
// Shaped [num_pages, page_size, 1, D+4] uint8 by the engines, but the bytes are NOT 132-byte token records.
#pragma once
#include <cstdint>
#include <cstring>
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
};

}  // namespace dsa::ref
