// mla.kcache_store CPU reference: tokens in parallel (distinct slots, checked by parse()).
#include <omp.h>

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

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& k_pe = c.input("k_pe");
  const Tensor& slots = c.input("slot_mapping");
  const Tensor& cache_in = c.input("kv_cache_in");
  const std::int64_t T = kv_c.dim(0);
  const L layout = p.layout;
  const std::int64_t capacity = cache_in.dim(0) * layout.page_size;

  Tensor cache = cache_in.clone();
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
