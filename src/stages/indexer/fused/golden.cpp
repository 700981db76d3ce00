// indexer.fused: input generator (indexer.logits_paged's paged MTP generator) and golden catalogue rows.
#include "stages/indexer/fused/stage.hpp"
#include "stages/indexer/logits_paged/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::fused {

using golden::GoldenSpec;
using golden::I;
using golden::kInf;
using golden::kNaN;
using golden::S;

std::vector<golden::Generator> generators() {
  return {{"fused.paged_mtp", "indexer.fused",
           "the inputs of logits.paged_mtp (paged fp8 cache with shuffled pages and poisoned tails, q, gates, context "
           "lengths); the case's attr k. list context_lens; dims next_n, H, D, page_size, spare_blocks, extra_pages; "
           "params context_lens_2d",
           [](const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) { logits_paged::generate_paged(s, seed, threads, c); }}};
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "fused_decode_mtp", .stage = "indexer.fused", .generator = "fused.paged_mtp", .seed = 701,
       .dims = {{"next_n", 2}}, .lists = {{"context_lens", {300, 2100, 64, 2049}}}, .attrs = {{"k", I(256)}},
       .doc = "fused indexer + top-k, MTP next_n = 2: rows shorter and longer than k, judged with the sm90-fp8 band of each logit"},
      {.name = "fused_sm90_exact_band", .stage = "indexer.fused", .generator = "fused.paged_mtp", .seed = 702,
       .dims = {{"next_n", 1}}, .lists = {{"context_lens", {700, 130}}},
       .attrs = {{"k", I(64)}, {"kernel", S("deepgemm-sm90")}, {"sorted", I(1)}, {"fast_path", I(0)}},
       .doc = "kernel=deepgemm-sm90: the band is exact on the emulated sm90 logits; sorted output, no fast path"},
      {.name = "fused_nonfinite", .stage = "indexer.fused", .generator = "fused.paged_mtp", .seed = 704,
       .dims = {{"next_n", 2}, {"H", 32}, {"D", 64}}, .lists = {{"context_lens", {300, 90}}}, .attrs = {{"k", I(64)}},
       .poison = {{"q", 0, 40, kNaN}, {"weights", 2, 3, -kInf}, {"weights", 1, -1, kNaN}},
       .doc = "NaN policy: a NaN query code (row 0: NaN logits rank first), a -inf gate and an all-NaN gate row"},
      {.name = "fused_aiter_preshuffle", .stage = "indexer.fused", .generator = "fused.paged_mtp", .seed = 703,
       .dims = {{"next_n", 2}, {"H", 32}}, .lists = {{"context_lens", {400, 90}}},
       .attrs = {{"k", I(128)}, {"layout", S("aiter_preshuffle")}},
       .doc = "the fused path over ROCm aiter's preshuffled cache"},
  };
}

}  // namespace dsa::indexer::fused
