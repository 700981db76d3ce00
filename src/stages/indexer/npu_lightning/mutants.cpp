// indexer.npu_lightning: selftest case and mutants modelled on real bug shapes (CP metadata mixing B45, visibility
// off by one, relu after the weighting, weights dropped, unsorted output, 1-based indices, 0 padding), each with the
// verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::npu_lightning {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "linpu", .stage = "indexer.npu_lightning", .generator = "li_npu.requests", .seed = 42,
       .dims = {{"H", 16}, {"D", 32}, {"bs", 16}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {20, 5}}, {"q_len_next", {3, 2}}, {"kv_len_next", {40, 12}}},
       .attrs = {{"sparse_count", I(8)}},
       .doc = "a CP split with positions: rows seeing 3..40 keys around k = 8"},
  };
}

namespace {

std::function<void(Case&, const Expected&, std::uint64_t)> with_bug(Bug bug) { return reference_bug(&run, bug); }

// A kernel that reads metadata edited by f (it never sees inputs/positions).
std::function<void(Case&, const Expected&, std::uint64_t)> metadata_bug(std::function<void(Case&)> f) {
  return buggy([f](Case& c) {
    f(c);
    c.inputs.erase("positions");
  });
}

}  // namespace

std::vector<Mutant> mutants() {
  const V set_or_order{Verdict::FAIL, Verdict::STRUCTURE};
  return {
      {"linpu_cp_next_prev_kv", "B45", "linpu", set_or_order,
       "context parallel: the second half's call given the first half's kv lengths (rank-local and global views mixed)",
       metadata_bug([](Case& c) { c.inputs["actual_seq_lengths_key_next"] = c.input("actual_seq_lengths_key"); })},
      {"linpu_visibility_plus1", "B29", "linpu", V{Verdict::STRUCTURE}, "causal mask one key too wide (s <= p + 1)",
       metadata_bug([](Case& c) {
         for (const char* n : {"actual_seq_lengths_key", "actual_seq_lengths_key_next"})
           edit_input(c, n, [](Tensor& t) {
             for (std::int64_t b = 0; b < t.numel(); ++b) iset(t, b, t.int_at(b) + 1);
           });
       })},
      {"linpu_relu_after_weighting", "B4", "linpu", set_or_order, "relu applied to w*s instead of s (sum_h relu(w_h s_h))",
       with_bug(Bug::relu_after_weighting)},
      {"linpu_weights_ignored", "v4 §5", "linpu", set_or_order, "head weights not applied (sum_h relu(s_h))", with_bug(Bug::weights_ignored)},
      {"linpu_unsorted", "B9", "linpu", V{Verdict::STRUCTURE}, "indices in ascending index order although the op sorts by score",
       [](Case& c, const Expected&, std::uint64_t) { rows_ascending(output(c, "sparse_indices")); }},
      {"linpu_one_based", "B12", "linpu", V{Verdict::STRUCTURE}, "1-based key indices",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "sparse_indices");
         for (std::int64_t i = 0; i < o.numel(); ++i)
           if (o.int_at(i) >= 0) iset(o, i, o.int_at(i) + 1);
       }},
      {"linpu_padding_zero", "B12", "linpu", V{Verdict::STRUCTURE}, "rows shorter than k padded with 0 instead of -1",
       [](Case& c, const Expected&, std::uint64_t) { replace_padding(output(c, "sparse_indices"), 0); }},
  };
}

}  // namespace dsa::indexer::npu_lightning
