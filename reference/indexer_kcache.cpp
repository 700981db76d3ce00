// indexer.kcache_store — write k_fp8 + k_scale into the paged indexer K cache (spec v32 §3.4), bit-exact:
// kv_cache = copy of kv_cache_in; for each token t with slot = slot_mapping[t] >= 0: page = slot / page_size,
// offset = slot % page_size; the head_dim codes go to the page's value plane at offset*head_dim, the 4 raw bytes
// of k_scale[t] to the scale plane at page_size*head_dim + 4*offset (planar page layout, reference/kcache_layout.hpp).
// slot -1 = padded token, skipped. Out-of-range and duplicate slots are rejected by the stage's extra check, so
// every token writes distinct bytes and the parallel store is order-independent.
#include <omp.h>

#include <memory>
#include <string>
#include <vector>

#include "reference/kcache_layout.hpp"
#include "reference/v32_indexer.hpp"

namespace dsa::ref {

Expected indexer_kcache_store(const Case& c, const RefOptions& opt) {
  const Tensor& k_fp8 = c.input("k_fp8");
  const Tensor& k_scale = c.input("k_scale");
  const Tensor& slots = c.input("slot_mapping");
  const Tensor& cache_in = c.input("kv_cache_in");
  const std::int64_t T = k_fp8.dim(0), Dh = k_fp8.dim(1);

  Tensor cache = cache_in.clone();
  const KCacheView view = KCacheView::of(cache_in);
  const KCacheLayout layout = view.layout;
  if (layout.head_dim != Dh)
    throw SchemaError({c.file, c.name, "inputs/kv_cache_in", "dim 3 = head_dim + 4 = " + std::to_string(Dh + 4),
                       std::to_string(layout.head_dim + 4)});
  const std::int64_t capacity = view.num_pages * layout.page_size;
  auto slot_of = [&slots](std::int64_t t) { return slots.int_at(t); };
  for (std::int64_t t = 0; t < T; ++t) {  // defensive: the extra check normally rejects these first
    const std::int64_t s = slot_of(t);
    if (s < -1 || s >= capacity)
      throw SchemaError({c.file, c.name, "inputs/slot_mapping", "-1 or a slot in [0, " + std::to_string(capacity) + ")",
                         "token " + std::to_string(t) + ": " + std::to_string(s)});
  }

  // writer[slot] = token that stored into the slot (for describe), -1 = untouched.
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(capacity), -1);
  std::uint8_t* out = cache.data<std::uint8_t>();
  const std::uint8_t* codes = k_fp8.data<std::uint8_t>();
  const float* scales = k_scale.data<float>();
  const int threads = opt.thread_count();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t s = slot_of(t);
    if (s < 0) continue;  // padded token
    kcache_store_token(out, layout, s / layout.page_size, s % layout.page_size, codes + t * Dh, scales + t);
    (*writer)[static_cast<std::size_t>(s)] = t;  // distinct slots: no two threads touch the same entry
  }

  Expected e;
  RefTensor r;
  r.name = "kv_cache";
  r.kind = CompareKind::bytes;
  r.value = cache;
  r.describe = [layout, writer](std::int64_t byte) {
    std::string d = layout.describe(byte);
    const std::int64_t page = byte / layout.page_bytes(), rem = byte % layout.page_bytes();
    const std::int64_t tok = rem < layout.page_size * layout.head_dim ? rem / layout.head_dim
                                                                      : (rem - layout.page_size * layout.head_dim) / 4;
    const std::int64_t slot = page * layout.page_size + tok;
    const std::int64_t w = slot < static_cast<std::int64_t>(writer->size()) ? (*writer)[static_cast<std::size_t>(slot)] : -1;
    return d + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", stored from k token " + std::to_string(w) + ")" : ", not written by this store: must equal kv_cache_in)");
  };
  e.tensors.push_back(std::move(r));
  return e;
}

}  // namespace dsa::ref
