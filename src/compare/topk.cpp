// Tie-aware top-k comparator (spec v32 §5.5). Structure first — count = min(k, len), no duplicates, every index
// maps to a candidate of its row, -1 only as trailing padding, fast path [0..len-1] exactness, sort order — then
// sets: with reference scores r_j, bounds u_j and tau = the k-th score, every j with r_j - u_j > tau + u_tau must
// be selected and no j with r_j + u_j < tau - u_tau may be; swaps inside the band are accepted and counted.
#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::size_t kMaxExamples = 8;

double key(double x) { return std::isnan(x) ? kInf : x; }  // NaN ranks above everything (torch.topk)

}  // namespace

TopkRow topk_row(const TopkRef& t, std::int64_t row, const Tolerance& tol) {
  TopkRow tr;
  tr.len = t.len[static_cast<std::size_t>(row)];
  tr.n = std::min(t.k, tr.len);
  const std::int64_t C = t.scores.dim(1);
  const double* sc = t.scores.data<double>() + row * C;
  const double* bd = (t.bounds.defined() && !t.bounds.empty()) ? t.bounds.data<double>() + row * C : nullptr;
  const auto L = static_cast<std::size_t>(tr.len);
  tr.score.resize(L);
  tr.bound.resize(L);
  tr.cls.assign(L, Band::band);
  for (std::size_t p = 0; p < L; ++p) {
    const double s = key(sc[p]);
    tr.score[p] = s;
    tr.bound[p] = bd ? bd[p] : (std::isfinite(s) ? tol.rtol * std::fabs(s) + tol.atol : 0.0);
  }
  if (tr.len <= t.k) {  // every candidate is selected
    tr.tau = -kInf;
    tr.u_tau = 0;
    std::fill(tr.cls.begin(), tr.cls.end(), Band::must);
    return tr;
  }
  tr.tau = key(t.kth[static_cast<std::size_t>(row)]);
  if (bd) {
    tr.u_tau = 0;
    for (std::size_t p = 0; p < L; ++p)
      if (tr.score[p] == tr.tau) tr.u_tau = std::max(tr.u_tau, tr.bound[p]);
  } else {
    tr.u_tau = std::isfinite(tr.tau) ? tol.rtol * std::fabs(tr.tau) + tol.atol : 0.0;
  }
  for (std::size_t p = 0; p < L; ++p) {
    if (tr.score[p] - tr.bound[p] > tr.tau + tr.u_tau) tr.cls[p] = Band::must;
    else if (tr.score[p] + tr.bound[p] < tr.tau - tr.u_tau) tr.cls[p] = Band::must_not;
  }
  return tr;
}

CheckResult compare_topk(const Tensor& out, const RefTensor& ref, const Tolerance& tol) {
  CheckResult r;
  r.kind = CompareKind::topk_set;
  r.tensor = ref.name;
  r.tol = tol;
  r.numel = out.numel();
  const TopkRef& t = ref.topk;
  const auto R = static_cast<std::int64_t>(t.len.size());
  TopkStats st;
  st.rows = R;
  std::int64_t structure = 0, plus1 = 0, minus1 = 0, relative = 0, invalid = 0;
  std::string first_structure;
  auto note = [&](std::int64_t flat, const std::string& what, bool is_structure = false) {
    if (is_structure && first_structure.empty()) first_structure = what;
    if (!r.first) r.first = Location{flat, detail::describe(ref, flat) + ": " + what, 0, 0, 0, 0};
    if (st.examples.size() < kMaxExamples) st.examples.push_back(what);
  };
  if (R == 0 || out.numel() % R != 0 || ref.value.numel() != out.numel()) {
    r.verdict = Verdict::STRUCTURE;
    r.message = "index tensor of " + std::to_string(out.numel()) + " elements cannot hold " + std::to_string(R) +
                " rows like the reference " + shape_str(ref.value.shape());
    return r;
  }
  const std::int64_t W = out.numel() / R;
  double recall_sum = 0, jac_sum = 0;
  std::int64_t rows_scored = 0;
  for (std::int64_t row = 0; row < R; ++row) {
    const TopkRow tr = topk_row(t, row, tol);
    if (tr.n > W) {
      ++structure;
      note(row * W, "row " + std::to_string(row) + ": width " + std::to_string(W) + " < min(k, len) = " + std::to_string(tr.n), true);
      continue;
    }
    std::vector<std::int64_t> pos(static_cast<std::size_t>(W), -2);  // candidate position per entry (-1 pad, -2 invalid)
    std::set<std::int64_t> sel;
    std::int64_t row_struct = 0;
    for (std::int64_t i = 0; i < W; ++i) {
      const auto idx = out.int_at(row * W + i);
      auto rs = [row, i] { return "row " + std::to_string(row) + " pos " + std::to_string(i) + ": "; };  // built only for a note
      if (idx == -1) {
        pos[static_cast<std::size_t>(i)] = -1;
        if (i < tr.n) {
          ++row_struct;
          note(row * W + i, rs() + "-1 before min(k, len) = " + std::to_string(tr.n) + " entries (too few indices)", true);
        }
        continue;
      }
      if (i >= tr.n) {
        ++row_struct;
        note(row * W + i, rs() + "index " + std::to_string(idx) + " where -1 padding is required (min(k, len) = " +
                              std::to_string(tr.n) + ")", true);
        continue;
      }
      const std::int64_t p = (idx < -1) ? -1 : t.from_index(row, idx);
      if (p < 0 || p >= tr.len) {
        ++row_struct;
        ++invalid;
        if (idx >= 0 && t.from_index(row, idx - 1) >= 0) ++plus1;
        if (t.from_index(row, idx + 1) >= 0) ++minus1;
        if (idx >= 0 && idx < tr.len && t.to_index(row, idx) != idx) ++relative;
        note(row * W + i, rs() + "index " + std::to_string(idx) + " is not a candidate of the row (len " +
                              std::to_string(tr.len) + ")", true);
        continue;
      }
      pos[static_cast<std::size_t>(i)] = p;
      if (!sel.insert(p).second) {
        ++row_struct;
        note(row * W + i, rs() + "duplicate index " + std::to_string(idx), true);
      }
    }
    if (row_struct == 0 && t.fast_path && tr.len <= t.k) {
      for (std::int64_t i = 0; i < tr.len; ++i)
        if (pos[static_cast<std::size_t>(i)] != i) {
          ++row_struct;
          note(row * W + i, "row " + std::to_string(row) + ": fast path (len " + std::to_string(tr.len) + " <= k) must emit [" +
                                std::to_string(t.to_index(row, 0)) + " ..] in candidate order; pos " + std::to_string(i) +
                                " holds candidate " + std::to_string(pos[static_cast<std::size_t>(i)]), true);
          break;
        }
    }
    if (row_struct == 0 && t.sorted) {
      for (std::int64_t i = 0; i + 1 < tr.n; ++i) {
        const auto a = static_cast<std::size_t>(pos[static_cast<std::size_t>(i)]);
        const auto b = static_cast<std::size_t>(pos[static_cast<std::size_t>(i + 1)]);
        if (tr.score[b] - tr.bound[b] > tr.score[a] + tr.bound[a]) {
          ++row_struct;
          note(row * W + i + 1, "row " + std::to_string(row) + ": not in descending score order at pos " + std::to_string(i + 1), true);
          break;
        }
      }
    }
    structure += row_struct;
    if (row_struct) continue;
    // Sets.
    std::set<std::int64_t> rset;
    for (std::int64_t i = 0; i < W; ++i) {
      const auto idx = ref.value.int_at(row * W + i);
      if (idx == -1) continue;
      const std::int64_t p = t.from_index(row, idx);
      if (p >= 0) rset.insert(p);
    }
    std::int64_t band = 0;
    for (std::int64_t p = 0; p < tr.len; ++p) {
      const auto pu = static_cast<std::size_t>(p);
      const bool in = sel.count(p) != 0;
      if (tr.cls[pu] == Band::band) ++band;
      if (tr.cls[pu] == Band::must && !in) {
        ++st.hard_misses;
        note(row * W, "row " + std::to_string(row) + ": missing index " + std::to_string(t.to_index(row, p)) + " (score " +
                          detail::fmt(tr.score[pu]) + " > kth " + detail::fmt(tr.tau) + " + bounds " +
                          detail::fmt(tr.bound[pu] + tr.u_tau) + ")");
      } else if (tr.cls[pu] == Band::must_not && in) {
        ++st.hard_extras;
        note(row * W, "row " + std::to_string(row) + ": selected index " + std::to_string(t.to_index(row, p)) + " (score " +
                          detail::fmt(tr.score[pu]) + " < kth " + detail::fmt(tr.tau) + " - bounds " +
                          detail::fmt(tr.bound[pu] + tr.u_tau) + ")");
      } else if (in && !rset.count(p)) {
        ++st.swaps;
      }
    }
    st.band += band;
    st.max_band = std::max(st.max_band, band);
    std::int64_t inter = 0;
    for (auto p : sel) inter += rset.count(p) ? 1 : 0;
    const auto uni = static_cast<std::int64_t>(sel.size() + rset.size()) - inter;
    if (!rset.empty()) {
      const double rec = static_cast<double>(inter) / static_cast<double>(rset.size());
      recall_sum += rec;
      jac_sum += uni ? static_cast<double>(inter) / static_cast<double>(uni) : 1.0;
      st.min_recall = std::min(st.min_recall, rec);
      ++rows_scored;
    }
  }
  if (rows_scored) {
    st.recall = recall_sum / static_cast<double>(rows_scored);
    st.jaccard = jac_sum / static_cast<double>(rows_scored);
  }
  r.mismatches = structure + st.hard_misses + st.hard_extras;
  std::ostringstream m;
  if (structure) {
    r.verdict = Verdict::STRUCTURE;
    m << structure << " structural violation(s); first: " << first_structure;
    if (invalid && plus1 == invalid) m << "; hint: every invalid index is one past a candidate (index base +1?)";
    else if (invalid && minus1 == invalid) m << "; hint: every invalid index is one before a candidate (index base -1?)";
    else if (invalid && relative == invalid) m << "; hint: invalid indices look like relative positions (missing index-base transform?)";
  } else if (st.hard_misses || st.hard_extras) {
    r.verdict = Verdict::FAIL;
    m << st.hard_misses << " hard miss(es), " << st.hard_extras << " out-of-band selection(s); first: " << st.examples.front()
      << "; recall@k " << detail::fmt(st.recall) << ", jaccard " << detail::fmt(st.jaccard);
  } else {
    bool same = true;
    for (std::int64_t i = 0; i < out.numel() && same; ++i) same = out.int_at(i) == ref.value.int_at(i);
    r.verdict = same ? Verdict::BITEXACT : Verdict::WITHIN_BOUND;
    if (same) m << "identical to the reference (" << R << " rows)";
    else
      m << (st.swaps ? std::to_string(st.swaps) + " accepted in-band swap(s)" : std::string("same sets, order differs"))
        << "; recall@k " << detail::fmt(st.recall) << " (min " << detail::fmt(st.min_recall) << "), jaccard "
        << detail::fmt(st.jaccard);
  }
  if (r.verdict != Verdict::STRUCTURE)
    m << "; band " << st.band << " (max " << st.max_band << "/row), tie bound rtol " << detail::fmt(tol.rtol) << " atol "
      << detail::fmt(tol.atol);
  r.topk = st;
  r.message = m.str();
  return r;
}

}  // namespace dsa::cmp
