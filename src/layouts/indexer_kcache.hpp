// Layouts of the paged indexer K cache of DeepSeek-V3.2 (spec v32 §3.4). Pages of `page_size` tokens; every page
// keeps its page_size * D fp8 e4m3fn codes first, then page_size fp32 little-endian scales (token t's at
// page_size*D + 4t). Shaped [num_pages, page_size, 1, D+4] uint8 by the engines, but the bytes are NOT (D+4)-byte
// token records (except with page_size 1). Where a token's codes sit inside the value region is the layout:
//   indexer_kcache_planar  token-major, token t dim d at t*D + d: DeepGEMM fp8_paged_mqa_logits, sglang / vLLM
//                          indexer_k_quant_and_cache on CUDA (page_size 64)
//   aiter_rowmajor_p1      the same bytes with page_size 1 (132-byte records): ROCm/aiter indexer_k_quant_and_cache
//                          preshuffle=False, read by aiter's legacy paged MQA path over sglang's page_table_1
//   aiter_preshuffle       MFMA 16x16 tiles: tokens in groups of 16, each group 16*D bytes of D/16 tiles of 16 x 16
//                          (token-major inside a tile): t, d at (t/16)*16*D + (d/16)*256 + (t%16)*16 + d%16;
//                          page_size a multiple of 16. ROCm/aiter indexer_k_quant_and_cache preshuffle=True
//                          (csrc/kernels/cache_kernels.cu, indexer_k_quant_and_cache_kernel) and the Gluon reader
//                          _gluon_deepgemm_fp8_paged_mqa_logits_preshuffle (aiter/ops/triton/gluon/pa_mqa_logits.py),
//                          ROCm/aiter e4048607a535ace3a2b51ded31b1c8c2d45c0879
#pragma once
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "layouts/indexer_kcache_core.hpp"
#include "tensor/tensor.hpp"

namespace dsa::layouts {

enum class KCacheOrder { planar, preshuffle16 };

struct IndexerKCache {
  static constexpr const char* kName = "indexer_kcache_planar";
  static constexpr const char* kAiterRowMajorP1 = "aiter_rowmajor_p1";
  static constexpr const char* kAiterPreshuffle = "aiter_preshuffle";
  static constexpr std::int64_t kScaleBytes = kcache_core::kScaleBytes;  // one fp32 scale per token
  static constexpr std::int64_t kTile = kcache_core::kTile;              // aiter_preshuffle tile edge
  // Bytes per token (the engines' last dim): head_dim fp8 codes + the scale. The one definition of "D+4".
  static constexpr std::int64_t record_bytes(std::int64_t head_dim) { return head_dim + kScaleBytes; }
  static constexpr std::int64_t head_dim_of(std::int64_t record) { return record - kScaleBytes; }

  std::int64_t page_size = 64;
  std::int64_t head_dim = 128;
  KCacheOrder order = KCacheOrder::planar;
  std::int64_t page_bytes() const { return page_size * record_bytes(head_dim); }
  // Byte offset inside the cache tensor of (page, token-in-page, dim).
  std::int64_t value_offset(std::int64_t page, std::int64_t t, std::int64_t d = 0) const {
    return kcache_core::value_offset(page, t, d, page_size, head_dim, order == KCacheOrder::preshuffle16);
  }
  std::int64_t scale_offset(std::int64_t page, std::int64_t t) const { return kcache_core::scale_offset(page, t, page_size, head_dim); }
  // Token (within its page) and dim of a value byte (its offset inside the page < page_size * head_dim).
  std::int64_t token_of_value(std::int64_t r) const {
    if (order == KCacheOrder::planar) return r / head_dim;
    const std::int64_t g = r / (kTile * head_dim), in = r % (kTile * head_dim);
    return g * kTile + (in % (kTile * kTile)) / kTile;
  }
  std::int64_t dim_of_value(std::int64_t r) const {
    if (order == KCacheOrder::planar) return r % head_dim;
    const std::int64_t in = r % (kTile * head_dim);
    return (in / (kTile * kTile)) * kTile + in % kTile;
  }
  // Token (within its page) a byte offset belongs to, and whether it is a scale byte.
  std::int64_t token_of(std::int64_t byte) const {
    const std::int64_t r = byte % page_bytes();
    return r < page_size * head_dim ? token_of_value(r) : (r - page_size * head_dim) / kScaleBytes;
  }
  // Meaning of a byte offset: "page 17 token 5 dim 40" or "page 17 token 5 scale byte 2".
  std::string describe(std::int64_t byte) const;

  // encode: writes one token (head_dim e4m3 codes + the raw bytes of its fp32 scale: NaN payloads survive).
  void store(std::uint8_t* base, std::int64_t page, std::int64_t t, const std::uint8_t* values, const void* scale_bytes) const {
    if (order == KCacheOrder::planar) {
      std::memcpy(base + value_offset(page, t), values, static_cast<std::size_t>(head_dim));
    } else {
      for (std::int64_t d = 0; d < head_dim; d += kTile)
        std::memcpy(base + value_offset(page, t, d), values + d, static_cast<std::size_t>(kTile));
    }
    std::memcpy(base + scale_offset(page, t), scale_bytes, kScaleBytes);
  }
  // decode: token t's head_dim codes, in dim order.
  void load(const std::uint8_t* base, std::int64_t page, std::int64_t t, std::uint8_t* values) const {
    if (order == KCacheOrder::planar) {
      std::memcpy(values, base + value_offset(page, t), static_cast<std::size_t>(head_dim));
    } else {
      for (std::int64_t d = 0; d < head_dim; d += kTile)
        std::memcpy(values + d, base + value_offset(page, t, d), static_cast<std::size_t>(kTile));
    }
  }
};

// The named indexer K-cache layouts (`layout` attr of indexer.kcache_store and indexer.logits_paged).
const std::vector<std::string>& indexer_kcache_names();
std::optional<KCacheOrder> indexer_kcache_order(const std::string& name);
// "" when a cache of this page size and head_dim can be in the layout, else what the layout requires.
std::string indexer_kcache_requirement(const std::string& name, std::int64_t page_size, std::int64_t head_dim);
// The cache bytes relaid into indexer_kcache_planar (codes moved, scales in place): for readers that need planar pages.
Tensor indexer_kcache_to_planar(const Tensor& cache, KCacheOrder order);

// decode: read access to a cache tensor u8 [P, page_size, 1, D+4] in a given order.
struct IndexerKCacheView {
  const std::uint8_t* base = nullptr;
  IndexerKCache layout;
  std::int64_t num_pages = 0;
  static IndexerKCacheView of(const Tensor& cache, KCacheOrder order = KCacheOrder::planar) {
    IndexerKCacheView v;
    v.base = cache.data<std::uint8_t>();
    v.num_pages = cache.dim(0);
    v.layout.page_size = cache.dim(1);
    v.layout.head_dim = IndexerKCache::head_dim_of(cache.dim(3));
    v.layout.order = order;
    return v;
  }
  // Token t's codes: a pointer into the cache (planar) or into buf (head_dim bytes) where the layout scatters them.
  const std::uint8_t* codes(std::int64_t page, std::int64_t t, std::uint8_t* buf) const {
    if (layout.order == KCacheOrder::planar) return base + layout.value_offset(page, t);
    layout.load(base, page, t, buf);
    return buf;
  }
  // Planar caches only (tests): token t's contiguous codes.
  const std::uint8_t* values(std::int64_t page, std::int64_t t) const { return base + layout.value_offset(page, t); }
  float scale(std::int64_t page, std::int64_t t) const {
    float s;
    std::memcpy(&s, base + layout.scale_offset(page, t), sizeof s);  // little-endian host assumed (x86-64, aarch64)
    return s;
  }
};

}  // namespace dsa::layouts
