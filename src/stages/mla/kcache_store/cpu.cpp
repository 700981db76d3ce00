// mla.kcache_store CPU reference: tokens in parallel (distinct slots, checked by parse()).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "stages/mla/kcache_store/core.hpp"

namespace dsa::mla::kcache_store {

using L = layouts::MlaKCache;

void store_token(const Params& p, const std::uint16_t* c, const std::uint16_t* k_pe, std::uint8_t* rec) {
  float x[L::kTile];
  for (std::int64_t j = 0; j < L::kTiles; ++j) {
    for (std::int64_t d = 0; d < L::kTile; ++d) x[d] = num::bf16_to_f32(c[j * L::kTile + d]);
    std::uint8_t* codes = rec + j * L::kTile;
    const float s = indexer::quantize_block(x, L::kTile, p.quant, codes);
    for (std::int64_t d = 0; d < L::kTile; ++d)
      if ((codes[d] & 0x7F) == 0x7F) codes[d] = 0x7F;  // NaN (x86 writes the sign of 0/0): the CUDA code
    std::memcpy(rec + L::kScaleOff + 4 * j, &s, 4);
  }
  std::memcpy(rec + L::kRopeOff, k_pe, 2 * L::kRope);
}

void store_token_model1(const Params& p, const std::uint16_t* c, const std::uint16_t* k_pe, std::uint8_t* cache, std::int64_t slot) {
  using M = layouts::Model1KCache;
  std::uint8_t* tok = cache + p.m1.token_offset(slot);
  std::uint8_t* sc = cache + p.m1.scale_offset(slot);
  float x[M::kTile];
  for (std::int64_t j = 0; j < M::kTiles; ++j) {
    for (std::int64_t d = 0; d < M::kTile; ++d) x[d] = num::bf16_to_f32(c[j * M::kTile + d]);
    std::uint8_t* codes = tok + j * M::kTile;
    const float s = indexer::quantize_block(x, M::kTile, p.quant, codes);
    for (std::int64_t d = 0; d < M::kTile; ++d)
      if ((codes[d] & 0x7F) == 0x7F) codes[d] = 0x7F;
    // e8m0: the exponent of the power-of-two scale (+127), NaN 0xFF
    sc[j] = std::isfinite(s) && s > 0 ? static_cast<std::uint8_t>(std::clamp(std::ilogb(s) + 127, 0, 254)) : std::uint8_t{0xFF};
  }
  sc[M::kTiles] = 0;
  std::memcpy(tok + M::kNope, k_pe, 2 * M::kRope);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& k_pe = c.input("k_pe");
  const Tensor& slots = c.input("slot_mapping");
  const Tensor& cache_in = c.input("kv_cache_in");
  const std::int64_t T = kv_c.dim(0);
  const L layout = p.layout;
  const std::int64_t capacity = cache_in.dim(0) * layout.page_size;

  Tensor cache = cache_in.clone();
  if (p.model1) {
    const layouts::Model1KCache m1 = p.m1;
    const std::int64_t cap1 = cache_in.dim(0) * m1.page_size;
    auto w1 = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(cap1), -1);
    std::uint8_t* o1 = cache.data<std::uint8_t>();
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
    for (std::int64_t t = 0; t < T; ++t) {
      const std::int64_t s = slots.int_at(t);
      if (s < 0) continue;
      store_token_model1(p, kv_c.data<std::uint16_t>() + t * layouts::Model1KCache::kNope, k_pe.data<std::uint16_t>() + t * L::kRope, o1, s);
      (*w1)[static_cast<std::size_t>(s)] = t;
    }
    Expected e;
    RefTensor r;
    r.name = "kv_cache";
    r.kind = CompareKind::bytes;
    r.value = cache;
    r.describe = [m1, w1](std::int64_t byte) {
      const std::int64_t blk = m1.page_size * layouts::Model1KCache::kRecord, in = byte % blk;
      const std::int64_t tok = in < m1.page_size * layouts::Model1KCache::kToken ? in / layouts::Model1KCache::kToken
                                                                                  : (in - m1.page_size * layouts::Model1KCache::kToken) / 8;
      const std::int64_t slot = byte / blk * m1.page_size + tok;
      const std::int64_t w = slot < static_cast<std::int64_t>(w1->size()) ? (*w1)[static_cast<std::size_t>(slot)] : -1;
      return m1.describe(byte) + " (slot " + std::to_string(slot) +
             (w >= 0 ? ", stored from token " + std::to_string(w) + ")" : ", not written by this store: must equal kv_cache_in)");
    };
    e.tensors.push_back(std::move(r));
    return e;
  }
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(capacity), -1);
  std::uint8_t* out = cache.data<std::uint8_t>();
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t s = slots.int_at(t);
    if (s < 0) continue;  // padded token
    store_token(p, kv_c.data<std::uint16_t>() + t * L::kNope, k_pe.data<std::uint16_t>() + t * L::kRope,
                out + s * L::kRecord);
    (*writer)[static_cast<std::size_t>(s)] = t;  // distinct slots: no two threads touch the same entry
  }

  Expected e;
  RefTensor r;
  r.name = "kv_cache";
  r.kind = CompareKind::bytes;
  r.value = cache;
  r.describe = [layout, writer](std::int64_t byte) {
    const std::int64_t slot = byte / L::kRecord;
    const std::int64_t w = slot < static_cast<std::int64_t>(writer->size()) ? (*writer)[static_cast<std::size_t>(slot)] : -1;
    return layout.describe(byte) + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", stored from token " + std::to_string(w) + ")" : ", not written by this store: must equal kv_cache_in)");
  };
  e.tensors.push_back(std::move(r));
  return e;
}

}  // namespace dsa::mla::kcache_store
