// indexer.fused: selftest cases and mutants modelled on real bugs (validation_anchors.md §4 B-numbers).
#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "layouts/indexer_kcache.hpp"
#include "stage/mutant_kit.hpp"
#include "engines/logits/logits_engine.hpp"
#include "engines/topk/topk_canonical.hpp"
#include "stages/indexer/fused/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::fused {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "fused", .stage = "indexer.fused", .generator = "fused.paged_mtp", .seed = 1,
       .dims = {{"next_n", 2}, {"H", 32}, {"D", 64}}, .lists = {{"context_lens", {200, 40, 150}}}, .attrs = {{"k", I(32)}},
       .doc = "MTP next_n = 2, rows longer and shorter than k"},
  };
}

namespace {
// The kernel's selection computed from other scores: per row, engines::topk::topk_selection of score(r, p) over p < len.
template <class F>
void select_by(Case& c, const Expected& E, F score) {
  Tensor& o = output(c, "indices");
  const RefTensor& rt = reft(E, "indices");
  const std::int64_t R = o.dim(0), W = o.dim(1), k = rt.topk.k;
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t n = rt.topk.len[static_cast<std::size_t>(r)];
    std::vector<double> row(static_cast<std::size_t>(n));
    for (std::int64_t q = 0; q < n; ++q) row[static_cast<std::size_t>(q)] = score(r, q);
    const std::vector<std::int64_t> sel = engines::topk::topk_selection(row.data(), n, k, rt.topk.fast_path);
    for (std::int64_t j = 0; j < W; ++j) iset(o, r * W + j, j < static_cast<std::int64_t>(sel.size()) ? sel[static_cast<std::size_t>(j)] : -1);
  }
}
}  // namespace

std::vector<Mutant> mutants() {
  return {
      {"fused_relu_missing", "B4", "fused", V{Verdict::FAIL}, "top-k of head scores summed without ReLU",
       [](Case& c, const Expected& E, std::uint64_t) {
         const Tensor &q = c.input("q"), &bt = c.input("block_table"), &w = c.input("weights");
         const auto v = layouts::IndexerKCacheView::of(c.input("kv_cache"));
         const std::int64_t NN = q.dim(1), H = q.dim(2), D = q.dim(3), ps = v.layout.page_size, MB = bt.dim(1);
         select_by(c, E, [&](std::int64_t r, std::int64_t j) {
           const std::int64_t page = bt.data<std::int32_t>()[(r / NN) * MB + j / ps];
           return engines::logits::buggy_logit(engines::logits::LogitBug::no_relu, q.data<std::uint8_t>() + r * H * D, v.values(page, j % ps),
                                      v.scale(page, j % ps), w.data<float>() + r * H, H, D).first;
         });
       }},
      {"fused_positional", "B22", "fused", V{Verdict::FAIL}, "sparsity not engaged: the first k positions of every row",
       [](Case& c, const Expected& E, std::uint64_t) { select_by(c, E, [](std::int64_t, std::int64_t q) { return -static_cast<double>(q); }); }},
      {"fused_causal_plus_one", "B15", "fused", V{Verdict::FAIL, Verdict::STRUCTURE},
       "the causal length one too long: every row also ranks the next (future) key",
       mutant::buggy([](Case& c) {
         edit_input(c, "context_lens", [](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i) iset(t, i, t.int_at(i) + 1);
         });
       })},
  };
}

}  // namespace dsa::indexer::fused
