// Layout `indexer_kcache_planar`: the paged indexer K cache of DeepSeek-V3.2 (spec v32 §3.4; DeepGEMM
// fp8_paged_mqa_logits, sglang/vLLM indexer_k_quant_and_cache). Pages of `page_size` tokens; each page is PLANAR:
//   bytes [0, page_size*D)                 : fp8 e4m3fn values, token-major (token t, dim d at t*D + d)
//   bytes [page_size*D, page_size*(D+4))   : fp32 little-endian scales, token t at page_size*D + 4*t
// Shaped [num_pages, page_size, 1, D+4] uint8 by the engines, but the bytes are NOT (D+4)-byte token records.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/tensor.hpp"

namespace dsa::layouts {

struct IndexerKCache {
  static constexpr const char* kName = "indexer_kcache_planar";
  static constexpr std::int64_t kScaleBytes = 4;  // one fp32 scale per token
  // Bytes per token (the engines' last dim): head_dim fp8 codes + the scale. The one definition of "D+4".
  static constexpr std::int64_t record_bytes(std::int64_t head_dim) { return head_dim + kScaleBytes; }
  static constexpr std::int64_t head_dim_of(std::int64_t record) { return record - kScaleBytes; }

  std::int64_t page_size = 64;
  std::int64_t head_dim = 128;
  std::int64_t page_bytes() const { return page_size * record_bytes(head_dim); }
  // Byte offsets inside the cache tensor for (page, token-in-page).
  std::int64_t value_offset(std::int64_t page, std::int64_t t) const { return page * page_bytes() + t * head_dim; }
  std::int64_t scale_offset(std::int64_t page, std::int64_t t) const {
    return page * page_bytes() + page_size * head_dim + kScaleBytes * t;
  }
  // Token (within its page) a byte offset belongs to, and whether it is a scale byte.
  std::int64_t token_of(std::int64_t byte) const {
    const std::int64_t r = byte % page_bytes();
    return r < page_size * head_dim ? r / head_dim : (r - page_size * head_dim) / kScaleBytes;
  }
  // Meaning of a byte offset: "page 17 token 5 dim 40" or "page 17 token 5 scale byte 2".
  std::string describe(std::int64_t byte) const;

  // encode: writes one token (head_dim e4m3 codes + the raw bytes of its fp32 scale: NaN payloads survive).
  void store(std::uint8_t* base, std::int64_t page, std::int64_t t, const std::uint8_t* values, const void* scale_bytes) const {
    std::memcpy(base + value_offset(page, t), values, static_cast<std::size_t>(head_dim));
    std::memcpy(base + scale_offset(page, t), scale_bytes, kScaleBytes);
  }
};

// decode: read access to a cache tensor u8 [P, page_size, 1, D+4].
struct IndexerKCacheView {
  const std::uint8_t* base = nullptr;
  IndexerKCache layout;
  std::int64_t num_pages = 0;
  static IndexerKCacheView of(const Tensor& cache) {
    IndexerKCacheView v;
    v.base = cache.data<std::uint8_t>();
    v.num_pages = cache.dim(0);
    v.layout.page_size = cache.dim(1);
    v.layout.head_dim = IndexerKCache::head_dim_of(cache.dim(3));
    return v;
  }
  const std::uint8_t* values(std::int64_t page, std::int64_t t) const { return base + layout.value_offset(page, t); }
  float scale(std::int64_t page, std::int64_t t) const {
    float s;
    std::memcpy(&s, base + layout.scale_offset(page, t), sizeof s);  // little-endian host assumed (x86-64, aarch64)
    return s;
  }
};

}  // namespace dsa::layouts
