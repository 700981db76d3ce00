// indexer.topk: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/indexer/topk/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::topk {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "topk_rel", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 1,
       .lists = {{"lengths", {48, 30, 5, 0, 20, 12}}}, .attrs = {{"k", I(8)}},
       .doc = "rows longer and shorter than k, an empty row"},
      {.name = "topk_abs", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 1,
       .lists = {{"lengths", {48, 30, 5, 0, 20, 12}}, {"row_starts", {50, 50, 50, 50, 50, 50}}},
       .attrs = {{"k", I(8)}, {"index_base", S("absolute")}}, .doc = "absolute column indices"},
      {.name = "topk_page", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 1,
       .lists = {{"lengths", {40, 41, 10, 33}}},
       .attrs = {{"k", I(8)}, {"index_base", S("page_slot")}, {"page_size", I(16)}, {"rows_per_request", I(2)}},
       .doc = "page-slot indices, two rows per request"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"topk_index_base_plus1", "B12", "topk_rel", V{Verdict::STRUCTURE}, "indices emitted 1-based",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) >= 0) iset(o, i, o.int_at(i) + 1);
       }},
      {"topk_padding_missing", "B12", "topk_rel", V{Verdict::STRUCTURE}, "rows shorter than k padded with 0 instead of -1",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) == -1) iset(o, i, 0);
       }},
      {"topk_duplicate", "B9", "topk_rel", V{Verdict::STRUCTURE}, "one index emitted twice in a row",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         iset(o, 1, o.int_at(0));
       }},
      {"topk_out_of_band_swap", "B9", "topk_rel", V{Verdict::FAIL}, "a clear winner replaced by the row's lowest score",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const RefTensor& rt = reft(E, "indices");
         const cmp::TopkRow tr = cmp::topk_row(rt.topk, 0, mutant::default_tolerance(c, "indices"));
         std::int64_t worst = -1, best = -1;
         for (std::int64_t p = 0; p < tr.len; ++p) {
           const auto pu = static_cast<std::size_t>(p);
           if (tr.cls[pu] == cmp::Band::must_not && (worst < 0 || tr.score[pu] < tr.score[static_cast<std::size_t>(worst)])) worst = p;
           if (tr.cls[pu] == cmp::Band::must && (best < 0 || tr.score[pu] > tr.score[static_cast<std::size_t>(best)])) best = p;
         }
         if (worst < 0 || best < 0) throw std::runtime_error("topk_out_of_band_swap: row 0 has no clear winner/loser");
         for (std::int64_t i = 0; i < o.dim(1); ++i)
           if (rt.topk.from_index(0, o.int_at(i)) == best) iset(o, i, rt.topk.to_index(0, worst));
       }},
      {"topk_positional", "B22", "topk_rel", V{Verdict::FAIL}, "sparsity not engaged: first k positions selected",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const TopkRef& t = reft(E, "indices").topk;
         const std::int64_t W = o.dim(1);
         for (std::int64_t r = 0; r < o.dim(0); ++r)
           if (t.len[static_cast<std::size_t>(r)] > t.k)
             for (std::int64_t i = 0; i < W; ++i) iset(o, r * W + i, i < t.k ? t.to_index(r, i) : -1);
       }},
      {"topk_causal_off_by_one", "B15", "topk_rel", V{Verdict::STRUCTURE}, "row lengths one too long",
       mutant::buggy([](Case& c) {
         const std::int64_t C = c.input("logits").dim(1);
         edit_input(c, "lengths", [C](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < C) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"topk_relative_not_absolute", "B11", "topk_abs", V{Verdict::STRUCTURE}, "relative positions where absolute columns are expected",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "indices");
         const Tensor& rs = c.input("row_starts");
         const std::int64_t W = o.dim(1);
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) >= 0) iset(o, i, o.int_at(i) - rs.int_at(i / W));
       }},
      {"topk_page_wrong_request", "B11", "topk_page", V{Verdict::STRUCTURE}, "slots mapped through another request's page table row",
       mutant::buggy([](Case& c) {
         edit_input(c, "page_table", [](Tensor& t) {
           const std::int64_t nb = t.dim(1);
           for (std::int64_t j = 0; j < nb; ++j) {
             const std::int64_t a = t.int_at(j), b = t.int_at(nb + j);
             iset(t, j, b);
             iset(t, nb + j, a);
           }
         });
       })}
  };
}

}  // namespace dsa::indexer::topk
