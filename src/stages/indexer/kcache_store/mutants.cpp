// indexer.kcache_store: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "layouts/indexer_kcache_misread.hpp"
#include "stages/indexer/kcache_store/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::kcache_store {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "kcache", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 1,
       .dims = {{"T", 24}, {"P", 3}}, .params = {{"pad_frac", 0.25}}, .doc = "shuffled slots with padded tokens"},
      {.name = "kcache_preshuffle", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 1,
       .dims = {{"T", 40}, {"P", 1}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"layout", S("aiter_preshuffle")}},
       .doc = "ROCm aiter preshuffled cache (16x16 tiles)"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"kcache_token_interleaved", "B5", "kcache", V{Verdict::FAIL}, "cache written as 132-byte token records",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "kv_cache");
         std::memcpy(o.raw(), c.input("kv_cache_in").raw(), o.nbytes());
         const auto L = layouts::IndexerKCacheView::of(o).layout;
         const Tensor& sm = c.input("slot_mapping");
         for (std::int64_t i = 0; i < sm.numel(); ++i) {
           const std::int64_t slot = sm.int_at(i);
           if (slot < 0) continue;
           const std::int64_t rec = (slot / L.page_size) * L.page_bytes() + (slot % L.page_size) * layouts::IndexerKCache::record_bytes(L.head_dim);
           std::memcpy(o.data<std::uint8_t>() + rec, c.input("k_fp8").data<std::uint8_t>() + i * L.head_dim,
                       static_cast<std::size_t>(L.head_dim));
           std::memcpy(o.data<std::uint8_t>() + rec + L.head_dim, c.input("k_scale").data<float>() + i, 4);
         }
       }},
      {"kcache_padded_token_written", "B12", "kcache", V{Verdict::FAIL},
       "padded tokens (slot -1) written to the lowest slots no other token stores into (slot 0 first)",
       mutant::buggy([](Case& c) {
         edit_input(c, "slot_mapping", write_padded_tokens);
       })},
      {"kcache_preshuffle_as_rowmajor", "aiter", "kcache_preshuffle", V{Verdict::FAIL},
       "preshuffle=True cache written token-major (the planar layout): the aiter preshuffled readers see scrambled tiles",
       mutant::buggy([](Case& c) { c.attrs["layout"] = S(layouts::IndexerKCache::kName); })}
  };
}

}  // namespace dsa::indexer::kcache_store
