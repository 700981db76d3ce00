// v41.select: selftest cases and mutants modelled on real bug shapes (spec v41 §8: B58 the partial tail block dropped
// instead of pinned, B60 a candidate buffer overflow returning valid-looking wrong indices; a consumer that ignores
// the published blocks; descending instead of ascending output; the window offset missing; the reference's short-row
// quirk where an engine pads), each with the verdict it must get.
#include <algorithm>
#include <functional>
#include <set>

#include "engines/topk/topk_canonical.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/v41/select/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::select {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "v41.select";
  const char* g = "v41sel.scores";
  return {
      {.name = "v41sel_pub", .stage = st, .generator = g, .seed = 41, .dims = {{"S", 4}, {"N", 500}},
       .lists = {{"positions", {499, 300, 77, 21}}}, .attrs = {{"k", I(32)}, {"topk_blocks", I(16)}, {"publish", I(1)}},
       .doc = "the candidate source layer, every row's newest block partial"},
      {.name = "v41sel_cons", .stage = st, .generator = g, .seed = 42, .dims = {{"S", 4}, {"N", 500}},
       .lists = {{"positions", {499, 400, 200, 120}}}, .params = {{"consumer", 1}, {"pub_blocks", 12}},
       .attrs = {{"k", I(32)}}, .doc = "a consumer inside 12 published blocks (96 positions, k 32)"},
      {.name = "v41sel_cons_short", .stage = st, .generator = g, .seed = 43, .dims = {{"S", 3}, {"N", 500}},
       .lists = {{"positions", {499, 300, 150}}}, .params = {{"consumer", 1}, {"pub_blocks", 3}},
       .attrs = {{"k", I(32)}}, .doc = "a consumer inside 3 published blocks: 24 candidates < k, -1 padded"},
  };
}

namespace {

// A kernel's output `name` row by row: row(p, r) = row r's emitted indices (no padding), written -1 padded.
void rewrite_rows(Case& c, const std::string& name, const std::function<std::vector<std::int64_t>(const Params&, std::int64_t)>& row) {
  BoundCase b;
  if (auto pr = validate_case(c, false, &b); !pr.empty()) throw SchemaError(pr.front());
  const Params& p = dynamic_cast<const Params&>(*b.params);
  Tensor& o = output(c, name);
  const std::int64_t W = o.dim(1);
  for (std::int64_t r = 0; r < p.S; ++r) {
    const std::vector<std::int64_t> v = row(p, r);
    for (std::int64_t j = 0; j < W; ++j) iset(o, r * W + j, j < static_cast<std::int64_t>(v.size()) ? v[static_cast<std::size_t>(j)] : -1);
  }
}

}  // namespace

std::vector<Mutant> mutants() {
  return {
      {"v41sel_tail_block_dropped", "B58", "v41sel_pub", V{Verdict::FAIL, Verdict::STRUCTURE},
       "the partial newest block dropped instead of pinned (the tail not padded with -inf: only full blocks are ranked)",
       [](Case& c, const Expected&, std::uint64_t) {
         rewrite_rows(c, "published_blocks", [&c](const Params& p, std::int64_t r) {
           std::vector<std::int64_t> ids;
           std::vector<double> sc;
           row_blocks(c, p, r, ids, sc);
           const std::int64_t n = reach(c, p, r);
           if (n % p.block_size != 0 && !ids.empty() && ids.back() == (n - 1) / p.block_size) ids.pop_back(), sc.pop_back();
           return top_ascending(ids, sc, p.topk_blocks);
         });
       }},
      {"v41sel_mask_ignored", "v41 §5", "v41sel_cons", V{Verdict::FAIL, Verdict::STRUCTURE},
       "a consumer layer scoring every reachable position instead of only those of the published blocks",
       buggy([](Case& c) { c.inputs.erase("candidate_blocks"); })},
      {"v41sel_candidate_overflow", "B60", "v41sel_cons", V{Verdict::FAIL, Verdict::STRUCTURE},
       "the candidate buffer holds 64 columns: candidate column c >= 64 of the published list reads column c - 64 "
       "(valid-looking wrong positions)",
       [](Case& c, const Expected&, std::uint64_t) {
         rewrite_rows(c, "indices", [&c](const Params& p, std::int64_t r) {
           // the buffer's columns: position of column c = block[c / 8] * 8 + c % 8, wrapped at the buffer's end
           constexpr std::int64_t kCap = 64;
           const Tensor& cb = c.input("candidate_blocks");
           std::vector<std::int64_t> pos;
           std::vector<double> sc;
           std::set<std::int64_t> seen;
           const std::int64_t n = reach(c, p, r);
           for (std::int64_t i = 0; i < p.M; ++i) {
             const std::int64_t blk = cb.int_at(r * p.M + i);
             if (blk < 0) break;
             for (std::int64_t o = 0; o < p.block_size; ++o) {
               const std::int64_t col = (i * p.block_size + o) % kCap;
               const std::int64_t j = cb.int_at(r * p.M + col / p.block_size) * p.block_size + col % p.block_size;
               if (j >= n || !seen.insert(j).second) continue;
               pos.push_back(j), sc.push_back(c.input("scores").value(r * p.N + j));
             }
           }
           std::vector<std::int64_t> v = top_ascending(pos, sc, std::min(p.k, n));
           for (auto& x : v) x += p.window;
           return v;
         });
       }},
      {"v41sel_descending", "v41 §5", "v41sel_cons", V{Verdict::FAIL, Verdict::STRUCTURE},
       "the selection emitted in descending score order (torch.topk sorted) instead of ascending positions",
       [](Case& c, const Expected&, std::uint64_t) {
         rewrite_rows(c, "indices", [&c](const Params& p, std::int64_t r) {
           std::vector<std::int64_t> pos;
           std::vector<double> sc;
           row_candidates(c, p, r, pos, sc);
           std::vector<std::int64_t> v;  // canonical (descending score) order, not sorted
           for (auto q : engines::topk::topk_canonical(sc.data(), static_cast<std::int64_t>(sc.size()), std::min(p.k, reach(c, p, r))))
             v.push_back(pos[static_cast<std::size_t>(q)] + p.window);
           return v;
         });
       }},
      {"v41sel_window_missing", "v41 §5", "v41sel_cons", V{Verdict::FAIL, Verdict::STRUCTURE},
       "the selected positions emitted without the window offset (indices into the compressed KV alone)",
       buggy([](Case& c) { set_attr(c, "window", std::int64_t{0}); })},
      {"v41sel_short_row_filled", "v41 §5", "v41sel_cons_short", V{Verdict::FAIL, Verdict::STRUCTURE},
       "an engine declared as padding (-1) that fills short rows with reachable non-candidates, as the reference model does",
       [](Case& c, const Expected&, std::uint64_t) {
         rewrite_rows(c, "indices", [&c](const Params& p, std::int64_t r) {
           std::vector<std::int64_t> pos;
           std::vector<double> sc;
           row_candidates(c, p, r, pos, sc);
           const std::int64_t want = std::min(p.k, reach(c, p, r));
           std::set<std::int64_t> s(pos.begin(), pos.end());
           for (std::int64_t j = 0; static_cast<std::int64_t>(s.size()) < want && j < reach(c, p, r); ++j) s.insert(j);
           std::vector<std::int64_t> v;
           for (auto x : s) v.push_back(x + p.window);
           return v;
         });
       }},
  };
}

}  // namespace dsa::v41::select
