// indexer.logits_paged: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "layouts/indexer_kcache.hpp"
#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "layouts/indexer_kcache_misread.hpp"
#include "stages/indexer/logits_paged/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::logits_paged {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "paged", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 1,
       .dims = {{"next_n", 2}, {"H", 32}, {"D", 64}}, .lists = {{"context_lens", {70, 100}}},
       .doc = "MTP next_n = 2, two requests over two pages each"},
      {.name = "paged_preshuffle", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 2,
       .dims = {{"next_n", 2}, {"H", 32}, {"D", 64}}, .lists = {{"context_lens", {70, 100}}},
       .attrs = {{"layout", S("aiter_preshuffle")}}, .doc = "ROCm aiter preshuffled cache (16x16 tiles)"},
      {.name = "paged_aiter_p1", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 3,
       .dims = {{"next_n", 1}, {"H", 32}, {"D", 64}, {"page_size", 1}, {"extra_pages", 40}}, .lists = {{"context_lens", {150, 90}}},
       .attrs = {{"page_size", I(1)}, {"layout", S("aiter_rowmajor_p1")}}, .doc = "ROCm aiter legacy cache, page_size 1"},
      {.name = "paged_torch", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 4,
       .dims = {{"next_n", 1}, {"H", 64}, {"D", 128}}, .lists = {{"context_lens", {70, 130}}},
       .attrs = {{"clean_logits", I(1)}, {"kernel", S("vllm-torch")}},
       .doc = "vLLM's fp8_paged_mqa_logits_torch decode path (vllm-torch: fp32 head scores, derived bound)"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"paged_mtp_row_shift", "B11", "paged", V{Verdict::FAIL}, "MTP rows of a request swapped (row b*next_n+t off by one)",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "logits");
         const std::int64_t R = o.dim(0), W = o.dim(1), nn = c.input("q").dim(1);
         const Tensor src = o.clone();
         for (std::int64_t r = 0; r < R; ++r) {
           const std::int64_t from = (r / nn) * nn + (r % nn + 1) % nn;
           std::memcpy(o.raw() + r * W * static_cast<std::int64_t>(dtype_size(o.dtype())),
                       src.raw() + from * W * static_cast<std::int64_t>(dtype_size(o.dtype())), static_cast<std::size_t>(W) * dtype_size(o.dtype()));
         }
       }},
      {"paged_wrong_page", "B7", "paged", V{Verdict::FAIL, Verdict::NONFINITE},
       "block_table entries of request 0 used in the wrong order (reads poisoned page tails)",
       mutant::buggy([](Case& c) {
         edit_input(c, "block_table", [](Tensor& t) {
           const std::int64_t a = t.int_at(0), b = t.int_at(1);
           iset(t, 0, b);
           iset(t, 1, a);
         });
       })},
      {"paged_scale_interleaved", "B5", "paged", V{Verdict::FAIL, Verdict::NONFINITE},
       "K cache read as 132-byte token records (scale at the token-interleaved offset)",
       mutant::buggy([](Case& c) { c.inputs["kv_cache"] = layouts::misread_as_token_records(c.input("kv_cache")); })},
      {"paged_k_scale_dropped", "B6", "paged", V{Verdict::FAIL}, "the cache's per-token scales not applied (read as 1)",
       mutant::buggy([](Case& c) {
         edit_input(c, "kv_cache", [](Tensor& t) {
           const auto v = layouts::IndexerKCacheView::of(t);
           const float one = 1.0f;
           for (std::int64_t pg = 0; pg < v.num_pages; ++pg)
             for (std::int64_t s = 0; s < v.layout.page_size; ++s)
               std::memcpy(t.raw() + v.layout.scale_offset(pg, s), &one, sizeof one);
         });
       }), "B6"},
      {"paged_preshuffle_read_as_rowmajor", "aiter", "paged_preshuffle", V{Verdict::FAIL, Verdict::NONFINITE},
       "the preshuffled cache read token-major (Preshuffle=False reader on a preshuffle=True cache)",
       mutant::buggy([](Case& c) { c.attrs["layout"] = S(layouts::IndexerKCache::kName); })},
      {"paged_p1_table_read_as_64", "aiter", "paged_aiter_p1", V{Verdict::FAIL, Verdict::NONFINITE},
       "page_size 1 table read in 64-token blocks: key j taken from slot table[b, j - j % 64] + j % 64",
       mutant::buggy([](Case& c) {
         const std::int64_t P = c.input("kv_cache").dim(0);
         edit_input(c, "block_table", [P](Tensor& t) {
           const Tensor src = t.clone();
           const std::int64_t W = t.dim(1);
           for (std::int64_t b = 0; b < t.dim(0); ++b)
             for (std::int64_t j = 0; j < W; ++j) {
               const std::int64_t first = src.int_at(b * W + j - j % 64);
               if (first >= 0) iset(t, b * W + j, (first + j % 64) % P);
             }
         });
       })},
      {"paged_torch_k_scale_dropped", "B6", "paged_torch", V{Verdict::FAIL}, "vllm-torch: the cache's per-token scales not applied",
       mutant::buggy([](Case& c) {
         edit_input(c, "kv_cache", [](Tensor& t) {
           const auto v = layouts::IndexerKCacheView::of(t);
           const float one = 1.0f;
           for (std::int64_t pg = 0; pg < v.num_pages; ++pg)
             for (std::int64_t s = 0; s < v.layout.page_size; ++s)
               std::memcpy(t.raw() + v.layout.scale_offset(pg, s), &one, sizeof one);
         });
       }), "B6"},
      {"paged_torch_causal_off_by_one", "B15", "paged_torch", V{Verdict::MASK_MISMATCH, Verdict::NONFINITE},
       "vllm-torch: the position mask keeps key context_len (<= instead of <)",
       mutant::buggy([](Case& c) {
         edit_input(c, "context_lens", [](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"paged_torch_weights_halved", "torch", "paged_torch", V{Verdict::FAIL},
       "vllm-torch: the q scale folded into the weights lost (weights / 2: a power-of-two scale off by one step)",
       mutant::buggy([](Case& c) { edit_input(c, "weights", [](Tensor& t) { for (auto& x : t.span<float>()) x = x * 0.5f; }); })},
      {"paged_relu_missing", "B4", "paged", V{Verdict::FAIL}, "head scores summed without ReLU",
       [](Case& c, const Expected& E, std::uint64_t) {
         // Every defined logit replaced by the no-ReLU value (its own f64 loop here, not the hypothesis code).
         Tensor& o = output(c, "logits");
         const RefTensor& rt = reft(E, "logits");
         const Tensor &q = c.input("q"), &bt = c.input("block_table"), &w = c.input("weights");
         const auto v = layouts::IndexerKCacheView::of(c.input("kv_cache"));
         const std::int64_t NN = q.dim(1), H = q.dim(2), D = q.dim(3), W = o.dim(1), ps = v.layout.page_size;
         for (std::int64_t f : finite_defined(rt)) {
           const std::int64_t r = f / W, j = f % W, b = r / NN;
           const std::int64_t page = bt.data<std::int32_t>()[b * bt.dim(1) + j / ps];
           double sum = 0;
           for (std::int64_t h = 0; h < H; ++h) {
             double s = 0;
             for (std::int64_t d = 0; d < D; ++d)
               s += q.value((r * H + h) * D + d) * num::e4m3_to_f32(v.values(page, j % ps)[d]);
             sum += s * w.value(r * H + h);
           }
           o.set_value(f, sum * v.scale(page, j % ps));
         }
       }, "B4"}
  };
}

}  // namespace dsa::indexer::logits_paged
