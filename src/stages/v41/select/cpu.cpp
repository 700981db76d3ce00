// v41.select reference: rows in parallel (each row independent); the canonical order of engines/topk (descending
// score, NaN first, ties by lower position) picks the reference's members, the comparator accepts any tie choice.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engines/topk/topk_canonical.hpp"
#include "stages/v41/select/core.hpp"
#include "stages/v41/select/stage.hpp"

namespace dsa::v41::select {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Per-row candidate lists (ascending ids) of one output, for the index maps.
struct Lists {
  std::vector<std::vector<std::int64_t>> ids;
  std::int64_t offset = 0;  // emitted = id + offset
  std::int64_t find(std::int64_t r, std::int64_t id) const {
    const auto& v = ids[static_cast<std::size_t>(r)];
    const auto it = std::lower_bound(v.begin(), v.end(), id);
    return it != v.end() && *it == id ? it - v.begin() : -1;
  }
};

// One topk_set output from per-row candidate lists and scores: the canonical pick of min(k, |list|) candidates,
// emitted in ascending id order + offset.
// bounds (may be null): per row and candidate, the bound of its score (a layer chain's upstream bound).
// picks (may be null): per row the ids the CUDA backend selected, in canonical order (cuda.cu); else topk_canonical.
RefTensor package(const char* name, std::int64_t S, std::int64_t W, std::int64_t k, const std::vector<std::vector<double>>& score,
                  std::shared_ptr<const Lists> lists, const std::vector<std::vector<double>>* bounds, const RowPicks* picks) {
  std::int64_t C = 1;
  for (const auto& v : score) C = std::max<std::int64_t>(C, static_cast<std::int64_t>(v.size()));
  RefTensor t;
  t.name = name;
  t.kind = CompareKind::topk_set;
  t.value = Tensor(DType::i32, {S, W});
  t.topk.k = k;
  t.topk.scores = Tensor(DType::f64, {S, C});
  t.topk.len.resize(static_cast<std::size_t>(S));
  t.topk.kth.resize(static_cast<std::size_t>(S));
  for (std::int64_t r = 0; r < S; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const auto& sc = score[ru];
    const std::int64_t len = static_cast<std::int64_t>(sc.size());
    double* row = t.topk.scores.data<double>() + r * C;
    std::fill(row, row + C, -kInf);
    std::copy(sc.begin(), sc.end(), row);
    std::vector<std::int64_t> sel;
    if (picks) {  // the device's ids, as entries of the row's list (the two sides built the same lists: checked)
      if (picks->len[ru] != len) throw std::logic_error(std::string(name) + ": the CUDA backend found " + std::to_string(picks->len[ru]) +
                                                         " candidates in row " + std::to_string(r) + ", the host " + std::to_string(len));
      for (std::int64_t j = 0; j < std::min(k, len); ++j) sel.push_back(lists->find(r, picks->ids[static_cast<std::size_t>(r * picks->k + j)]));
    } else {
      sel = engines::topk::topk_canonical(row, len, k);
    }
    t.topk.len[ru] = len;
    t.topk.kth[ru] = sel.empty() ? -kInf : row[sel.back()];
    std::sort(sel.begin(), sel.end());  // candidates are in ascending id order: the emitted order
    for (std::int64_t j = 0; j < W; ++j)
      t.value.data<std::int32_t>()[r * W + j] =
          j < static_cast<std::int64_t>(sel.size()) ? static_cast<std::int32_t>(lists->ids[ru][static_cast<std::size_t>(sel[static_cast<std::size_t>(j)])] + lists->offset) : -1;
  }
  t.topk.bounds = Tensor(DType::f64, {S, C});  // the scores are the case's inputs: exact (ties are exact ties only)
  if (bounds)
    for (std::int64_t r = 0; r < S; ++r)
      for (std::size_t q = 0; q < (*bounds)[static_cast<std::size_t>(r)].size(); ++q)
        t.topk.bounds.data<double>()[r * C + static_cast<std::int64_t>(q)] = (*bounds)[static_cast<std::size_t>(r)][q];
  t.topk.to_index = [lists](std::int64_t r, std::int64_t q) { return lists->ids[static_cast<std::size_t>(r)][static_cast<std::size_t>(q)] + lists->offset; };
  t.topk.from_index = [lists](std::int64_t r, std::int64_t idx) { return lists->find(r, idx - lists->offset); };
  t.topk.fast_path = false;
  t.topk.ascending = true;
  t.topk.short_rows_hint = "";
  return t;
}

std::int64_t out_width(const Case& c, const char* name, std::int64_t k) {
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(name); it != g->end() && it->second.rank() == 2) return it->second.dim(1);
  return k;
}

}  // namespace

std::vector<std::int64_t> top_ascending(const std::vector<std::int64_t>& ids, const std::vector<double>& score, std::int64_t n) {
  std::vector<std::int64_t> out;
  for (auto q : engines::topk::topk_canonical(score.data(), static_cast<std::int64_t>(score.size()), n)) out.push_back(ids[static_cast<std::size_t>(q)]);
  std::sort(out.begin(), out.end());
  return out;
}

std::int64_t score_col(const Params& p, std::int64_t entry, std::int64_t j) {
  return p.cand_layout ? entry * p.block_size + j % p.block_size : j;
}

std::int64_t reach(const Case& c, const Params& p, std::int64_t r) {
  const std::int64_t q = c.input("positions").int_at(r);
  return q < 0 ? 0 : (q + 1) / p.r;
}

void row_candidates(const Case& c, const Params& p, std::int64_t r, std::vector<std::int64_t>& pos, std::vector<double>& score) {
  const Tensor& sc = c.input("scores");
  const Tensor* cb = c.input_opt("candidate_blocks");
  const std::int32_t* list = cb ? cb->data<std::int32_t>() + r * p.M : nullptr;
  const std::int64_t n = reach(c, p, r);
  pos.clear(), score.clear();
  if (list && !p.short_rows_ref) {  // the listed blocks' positions only (work bounded by the list, not by the reach)
    for (std::int64_t e = 0; e < p.M && list[e] >= 0; ++e)
      for (std::int64_t j = list[e] * p.block_size; j < std::min(n, (list[e] + std::int64_t{1}) * p.block_size); ++j) {
        const double v = sc.value(r * p.N + score_col(p, e, j));
        if (v != -kInf) pos.push_back(j), score.push_back(v);
      }
    return;
  }
  for (std::int64_t j = 0; j < n; ++j) {
    // The REF quirk is a top-k over the masked row: every reachable position is a candidate, masked ones at -inf
    // (any of them may complete a short row, all tied); engines drop them.
    const std::int64_t e = list ? core::entry_of(list, p.M, j / p.block_size) : 0;
    const double v = e < 0 ? -kInf : sc.value(r * p.N + score_col(p, e, j));
    if (v == -kInf && !p.short_rows_ref) continue;
    pos.push_back(j), score.push_back(v);
  }
}

void row_blocks(const Case& c, const Params& p, std::int64_t r, std::vector<std::int64_t>& ids, std::vector<double>& score) {
  const Tensor& sc = c.input("scores");
  const std::int64_t n = reach(c, p, r), nb = (n + p.block_size - 1) / p.block_size;
  ids.clear(), score.clear();
  for (std::int64_t b = 0; b < nb; ++b) {
    const double m = core::block_score([&](std::int64_t j) { return sc.value(r * p.N + j); }, n, p.block_size, b);
    if (m != -kInf) ids.push_back(b), score.push_back(m);
  }
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return assemble(c, p, opt, nullptr, nullptr); }

Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const RowPicks* cand_picks, const RowPicks* block_picks) {
  const std::int64_t S = p.S;
  auto cand = std::make_shared<Lists>();
  cand->ids.resize(static_cast<std::size_t>(S));
  cand->offset = p.window;
  std::vector<std::vector<double>> cs(static_cast<std::size_t>(S));
  auto blocks = std::make_shared<Lists>();
  blocks->ids.resize(static_cast<std::size_t>(S));
  std::vector<std::vector<double>> bs(static_cast<std::size_t>(S));
#pragma omp parallel for schedule(dynamic, 1) num_threads(opt.thread_count())
  for (std::int64_t r = 0; r < S; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    row_candidates(c, p, r, cand->ids[ru], cs[ru]);
    if (p.publish) row_blocks(c, p, r, blocks->ids[ru], bs[ru]);
  }
  // In a layer chain the scores are the upstream reference's, the kernel's own may lie within the upstream bound:
  // each candidate's band is that bound.
  std::vector<std::vector<double>> cb;
  const auto ib = opt.input_bounds.find("scores");
  const bool chained = ib != opt.input_bounds.end() && ib->second.numel() == S * p.N;
  if (chained) {
    cb.resize(static_cast<std::size_t>(S));
    for (std::int64_t r = 0; r < S; ++r)
      for (auto j : cand->ids[static_cast<std::size_t>(r)]) {
        // the entry of j's block in the row's list (scores_layout candidates)
        const std::int64_t e = p.cand_layout ? core::entry_of(c.input("candidate_blocks").data<std::int32_t>() + r * p.M, p.M, j / p.block_size) : 0;
        cb[static_cast<std::size_t>(r)].push_back(ib->second.value(r * p.N + score_col(p, e, j)));
      }
  }
  // k per row is min(k, reach): a row with fewer candidates than that pads (engines) or fills (REF quirk).
  RefTensor t = package("indices", S, out_width(c, "indices", p.k), p.k, cs, cand, chained ? &cb : nullptr, cand_picks);
  if (!p.short_rows_ref)
    t.topk.short_rows_hint = "the reference model's quirk (short rows completed with reachable non-candidates): set attr short_rows=ref";
  // Hints: the same picks without the window offset.
  t.topk.other_bases.emplace_back("no_window_offset", [cand](std::int64_t r, std::int64_t idx) { return cand->find(r, idx); });
  Expected e;
  e.tensors.push_back(std::move(t));
  if (p.publish) {
    blocks->offset = 0;
    e.tensors.push_back(package("published_blocks", S, out_width(c, "published_blocks", p.topk_blocks), p.topk_blocks, bs, blocks, nullptr, block_picks));
  }
  return e;
}

}  // namespace dsa::v41::select
