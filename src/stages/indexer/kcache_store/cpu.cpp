// indexer.kcache_store CPU reference: tokens in parallel (distinct slots, checked by parse()).
#include <omp.h>

#include <memory>
#include <string>
#include <vector>

#include "stages/indexer/kcache_store/stage.hpp"

namespace dsa::indexer::kcache_store {

namespace {

// One token's store (slot >= 0).
inline void store_token(const layouts::IndexerKCache& L, std::uint8_t* cache, std::int64_t slot, const std::uint8_t* codes,
                        const float* scale) {
  L.store(cache, slot / L.page_size, slot % L.page_size, codes, scale);
}

}  // namespace

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& k_fp8 = c.input("k_fp8");
  const Tensor& k_scale = c.input("k_scale");
  const Tensor& slots = c.input("slot_mapping");
  const Tensor& cache_in = c.input("kv_cache_in");
  const std::int64_t T = k_fp8.dim(0), Dh = k_fp8.dim(1);
  const layouts::IndexerKCache layout = p.layout;
  const std::int64_t capacity = cache_in.dim(0) * layout.page_size;

  Tensor cache = cache_in.clone();
  // writer[slot] = token that stored into the slot (for describe), -1 = untouched.
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(capacity), -1);
  std::uint8_t* out = cache.data<std::uint8_t>();
  const std::uint8_t* codes = k_fp8.data<std::uint8_t>();
  const float* scales = k_scale.data<float>();
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t s = slots.int_at(t);
    if (s < 0) continue;  // padded token
    store_token(layout, out, s, codes + t * Dh, scales + t);
    (*writer)[static_cast<std::size_t>(s)] = t;  // distinct slots: no two threads touch the same entry
  }

  return expected_of(std::move(cache), layout, std::move(writer));
}

Expected expected_of(Tensor cache, const layouts::IndexerKCache& layout, std::shared_ptr<std::vector<std::int64_t>> writer) {
  Expected e;
  RefTensor r;
  r.name = "kv_cache";
  r.kind = CompareKind::bytes;
  r.value = std::move(cache);
  r.describe = [layout, writer](std::int64_t byte) {
    const std::int64_t slot = byte / layout.page_bytes() * layout.page_size + layout.token_of(byte);
    const std::int64_t w = slot < static_cast<std::int64_t>(writer->size()) ? (*writer)[static_cast<std::size_t>(slot)] : -1;
    return layout.describe(byte) + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", stored from k token " + std::to_string(w) + ")" : ", not written by this store: must equal kv_cache_in)");
  };
  e.tensors.push_back(std::move(r));
  return e;
}

}  // namespace dsa::indexer::kcache_store
