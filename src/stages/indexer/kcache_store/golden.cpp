// indexer.kcache_store: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "layouts/indexer_kcache.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/kcache_store/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::kcache_store {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

namespace {

void gen_kcache(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 100), P = s.dim("P", 4), D = s.dim("D", s.model.head_dim), ps = s.dim("page_size", s.model.page_size);
  if (T > P * ps) throw std::invalid_argument(s.name + ": T must be <= P * page_size");
  Tensor kf(DType::fp8_e4m3fn, {T, D}), ksc(DType::f32, {T});
  make_keys(root, kK, T, D, threads, false, kf.data<std::uint8_t>(), ksc.data<float>());
  // Shuffled slots: token t -> perm[t] (any page, any offset); a fraction of tokens padded (slot -1).
  const auto perm = permutation(root.fork(kPerm), P * ps);
  Tensor slots(DType::i64, {T});
  const double pad = s.param("pad_frac", 0.1);
  for_rows(root, kPad, T, threads, [&](std::int64_t t, Rng& rng) {
    slots.data<std::int64_t>()[t] = rng.uniform() < pad ? -1 : perm[static_cast<std::size_t>(t)];
  });
  // The cache before the store: poison bytes (random, NaN scales included) that must survive untouched.
  Tensor cache(DType::u8, {P, ps, 1, layouts::IndexerKCache::record_bytes(D)});
  poison_bytes(root, P * ps, layouts::IndexerKCache::record_bytes(D), threads, cache.data<std::uint8_t>());
  c.inputs = {{"k_fp8", kf}, {"k_scale", ksc}, {"slot_mapping", slots}, {"kv_cache_in", cache}};
}


}  // namespace

std::vector<Generator> generators() {
  return {
      {"kcache.shuffled_slots", "indexer.kcache_store",
       "k = act_quant(bf16 keys) per token; slot_mapping a random permutation of the P*64 slots with pad_frac of the "
       "tokens padded (-1); kv_cache_in full of random poison bytes. dims T, P, D, page_size; params pad_frac",
       gen_kcache}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "kcache_nonfinite", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 302,
       .dims = {{"T", 20}, {"P", 1}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"page_size", I(64)}},
       .poison = {{"k_scale", 3, -1, kNaN}, {"k_scale", 4, -1, kInf}, {"k_fp8", 5, 0, kNaN}, {"k_fp8", 6, -1, -kNaN}},
       .doc = "NaN policy: NaN / inf scales and NaN codes (0x7F, 0xFF) in k are stored as given (a data move keeps its bytes)"},
      {.name = "kcache_shuffled_padded", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 301,
       .dims = {{"T", 150}, {"P", 4}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"page_size", I(64)}},
       .doc = "shuffled slots over 4 pages, padded tokens (slot -1), poisoned cache bytes that must survive"},
      {.name = "kcache_aiter_preshuffle", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 303,
       .dims = {{"T", 100}, {"P", 2}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"page_size", I(64)}, {"layout", S("aiter_preshuffle")}},
       .doc = "ROCm aiter preshuffle=True: codes in 16x16 tiles of 16 tokens x 16 dims, scales after the page's codes"},
      {.name = "kcache_aiter_rowmajor_p1", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 304,
       .dims = {{"T", 40}, {"P", 48}, {"page_size", 1}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"page_size", I(1)}, {"layout", S("aiter_rowmajor_p1")}},
       .doc = "ROCm aiter preshuffle=False (legacy): page_size 1, 132-byte token records, shuffled slots"},
  };
}

}  // namespace dsa::indexer::kcache_store
