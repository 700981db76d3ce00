// Tie-aware top-k comparator (spec v32 §5.5). Structure first — count = min(k, len), no duplicates, every index
// maps to a candidate of its row, -1 only as trailing padding, fast path [0..len-1] exactness, sort order — then
// sets: with reference scores r_j, bounds u_j and tau = the k-th score, every j with r_j - u_j > tau + u_tau must
// be selected and no j with r_j + u_j < tau - u_tau may be; swaps inside the band are accepted and counted.
#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
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

namespace {

// The judgement of one index tensor, row by row: structure (entries, fast path, order), then the tie-aware sets.
class TopkJudge {
 public:
  TopkJudge(const Tensor& out, const RefTensor& ref, const Tolerance& tol, bool plots)
      : out_(out), ref_(ref), tol_(tol), t_(ref.topk), R_(static_cast<std::int64_t>(t_.len.size())), plots_(plots) {
    r_.kind = CompareKind::topk_set;
    r_.tensor = ref.name;
    r_.tol = tol;
    r_.numel = out.numel();
    st_.rows = R_;
  }

  CheckResult run() {
    if (R_ == 0 || out_.numel() % R_ != 0 || ref_.value.numel() != out_.numel()) {
      r_.verdict = Verdict::STRUCTURE;
      r_.message = "index tensor of " + std::to_string(out_.numel()) + " elements cannot hold " + std::to_string(R_) +
                   " rows like the reference " + shape_str(ref_.value.shape());
      return r_;
    }
    W_ = out_.numel() / R_;
    if (plots_) {
      row_recall_.assign(static_cast<std::size_t>(R_), 1.0f);
      row_band_.assign(static_cast<std::size_t>(R_), 0);
      row_bad_.assign(static_cast<std::size_t>(R_), 0);
    }
    for (std::int64_t row = 0; row < R_; ++row) judge_row(row);
    if (plots_) r_.plot = make_plot();
    if (rows_scored_) {
      st_.recall = recall_sum_ / static_cast<double>(rows_scored_);
      st_.jaccard = jac_sum_ / static_cast<double>(rows_scored_);
    }
    summarize();
    return r_;
  }

 private:
  void note(std::int64_t flat, const std::string& what, bool is_structure = false) {
    if (is_structure && first_structure_.empty()) first_structure_ = what;
    if (!r_.first) r_.first = Location{flat, detail::describe(ref_, flat) + ": " + what, 0, 0, 0, 0, {}, {}, -1, false};
    if (st_.examples.size() < kMaxExamples) st_.examples.push_back(what);
  }

  void judge_row(std::int64_t row) {
    const TopkRow tr = topk_row(t_, row, tol_);
    if (all_nan(row, tr.len)) {
      if (nan_rows_++ == 0) first_nan_row_ = row;
    }
    if (tr.n > W_) {
      ++structure_;
      note(row * W_, "row " + std::to_string(row) + ": width " + std::to_string(W_) + " < min(k, len) = " + std::to_string(tr.n), true);
      return;
    }
    std::vector<std::int64_t> pos(static_cast<std::size_t>(W_), -2);  // candidate position per entry (-1 pad, -2 invalid)
    std::set<std::int64_t> sel;
    std::int64_t row_struct = entries(row, tr, pos, sel);
    if (row_struct == 0 && t_.fast_path && tr.len <= t_.k) row_struct += fast_path_order(row, tr, pos);
    // The set first, then the order: a wrong pick is a wrong pick (with its index-base hint), not an ordering issue.
    // A fast-path row's order is positional by definition: sorted=1 orders the other rows only.
    const bool fast_row = t_.fast_path && tr.len <= t_.k;
    if (row_struct == 0 && sets(row, tr, sel) && t_.sorted && !fast_row) row_struct += score_order(row, tr, pos);
    if (row_struct == 0 && t_.ascending) row_struct += index_order(row, tr);
    structure_ += row_struct;
  }

  // A row whose every candidate score is NaN (len > 0): any selection ranks equally (NaN ranks first, as in torch).
  bool all_nan(std::int64_t row, std::int64_t len) const {
    if (len <= 0) return false;
    const double* sc = t_.scores.data<double>() + row * t_.scores.dim(1);
    for (std::int64_t p = 0; p < len; ++p)
      if (!std::isnan(sc[p])) return false;
    return true;
  }

  // Every entry: -1 exactly as trailing padding, a candidate of the row, no duplicates. Returns the violations.
  std::int64_t entries(std::int64_t row, const TopkRow& tr, std::vector<std::int64_t>& pos, std::set<std::int64_t>& sel) {
    std::int64_t row_struct = 0;
    for (std::int64_t i = 0; i < W_; ++i) {
      const auto idx = out_.int_at(row * W_ + i);
      auto rs = [row, i] { return "row " + std::to_string(row) + " pos " + std::to_string(i) + ": "; };  // built only for a note
      if (idx == -1) {
        pos[static_cast<std::size_t>(i)] = -1;
        if (i < tr.n) {
          ++row_struct;
          note(row * W_ + i, rs() + "-1 before min(k, len) = " + std::to_string(tr.n) + " entries (too few indices)", true);
        }
        continue;
      }
      if (i >= tr.n && t_.short_rows_torch && idx >= 0 && idx < t_.scores.dim(1) && t_.from_index(row, idx) < 0) {
        pos[static_cast<std::size_t>(i)] = -1;  // torch.topk's pick of a -inf column past the row's candidates
        continue;
      }
      if (i >= tr.n) {
        ++row_struct;
        note(row * W_ + i, rs() + "index " + std::to_string(idx) + " where -1 padding is required (min(k, len) = " +
                               std::to_string(tr.n) + (t_.short_rows_hint.empty() ? ")" : "; " + t_.short_rows_hint + ")"), true);
        continue;
      }
      const std::int64_t p = (idx < -1) ? -1 : t_.from_index(row, idx);
      if (p < 0 || p >= tr.len) {
        ++row_struct;
        ++invalid_;
        if (idx >= 0 && t_.from_index(row, idx - 1) >= 0) ++plus1_;
        if (t_.from_index(row, idx + 1) >= 0) ++minus1_;
        if (idx >= 0 && idx < tr.len && t_.to_index(row, idx) != idx) ++relative_;
        for (std::size_t b = 0; b < t_.other_bases.size(); ++b)
          if (idx >= 0 && t_.other_bases[b].second(row, idx) >= 0) ++other_ok_[b];
        note(row * W_ + i, rs() + "index " + std::to_string(idx) + " is not a candidate of the row (len " +
                               std::to_string(tr.len) + ")", true);
        continue;
      }
      pos[static_cast<std::size_t>(i)] = p;
      if (!sel.insert(p).second) {
        ++row_struct;
        note(row * W_ + i, rs() + "duplicate index " + std::to_string(idx), true);
      }
    }
    return row_struct;
  }

  // Fast path (len <= k): the candidates in candidate order.
  std::int64_t fast_path_order(std::int64_t row, const TopkRow& tr, const std::vector<std::int64_t>& pos) {
    for (std::int64_t i = 0; i < tr.len; ++i)
      if (pos[static_cast<std::size_t>(i)] != i) {
        note(row * W_ + i, "row " + std::to_string(row) + ": fast path (len " + std::to_string(tr.len) + " <= k) must emit [" +
                               std::to_string(t_.to_index(row, 0)) + " ..] in candidate order; pos " + std::to_string(i) +
                               " holds candidate " + std::to_string(pos[static_cast<std::size_t>(i)]) +
                               " (a kernel without the fast path, e.g. torch.topk: set attr fast_path=0)", true);
        return 1;
      }
    return 0;
  }

  // ascending: the first min(k, len) entries in strictly increasing index order.
  std::int64_t index_order(std::int64_t row, const TopkRow& tr) {
    for (std::int64_t i = 0; i + 1 < tr.n; ++i)
      if (out_.int_at(row * W_ + i + 1) <= out_.int_at(row * W_ + i)) {
        note(row * W_ + i + 1, "row " + std::to_string(row) + ": not in ascending index order at pos " + std::to_string(i + 1) + " (" +
                                   std::to_string(out_.int_at(row * W_ + i)) + " then " + std::to_string(out_.int_at(row * W_ + i + 1)) + ")",
             true);
        return 1;
      }
    return 0;
  }

  // sorted=1: descending score order up to the bounds.
  std::int64_t score_order(std::int64_t row, const TopkRow& tr, const std::vector<std::int64_t>& pos) {
    for (std::int64_t i = 0; i + 1 < tr.n; ++i) {
      const auto a = static_cast<std::size_t>(pos[static_cast<std::size_t>(i)]);
      const auto b = static_cast<std::size_t>(pos[static_cast<std::size_t>(i + 1)]);
      if (tr.score[b] - tr.bound[b] > tr.score[a] + tr.bound[a]) {
        note(row * W_ + i + 1, "row " + std::to_string(row) + ": not in descending score order at pos " + std::to_string(i + 1), true);
        return 1;
      }
    }
    return 0;
  }

  // Tie-aware sets: must-picks selected, must-not-picks absent, in-band swaps counted; recall / jaccard. True when the
  // row's set is acceptable.
  bool sets(std::int64_t row, const TopkRow& tr, const std::set<std::int64_t>& sel) {
    const std::int64_t misses0 = st_.hard_misses, extras0 = st_.hard_extras;
    std::set<std::int64_t> rset;
    for (std::int64_t i = 0; i < W_; ++i) {
      const auto idx = ref_.value.int_at(row * W_ + i);
      if (idx == -1) continue;
      const std::int64_t p = t_.from_index(row, idx);
      if (p >= 0) rset.insert(p);
    }
    std::int64_t band = 0;
    for (std::int64_t p = 0; p < tr.len; ++p) {
      const auto pu = static_cast<std::size_t>(p);
      const bool in = sel.count(p) != 0;
      if (tr.cls[pu] == Band::band) ++band;
      if (tr.cls[pu] == Band::must && !in) {
        ++st_.hard_misses;
        note(row * W_, "row " + std::to_string(row) + ": missing index " + std::to_string(t_.to_index(row, p)) + " (score " +
                           detail::exact(tr.score[pu]) + " > kth " + detail::exact(tr.tau) + " + bounds " +
                           detail::fmt(tr.bound[pu] + tr.u_tau) + ")");
      } else if (tr.cls[pu] == Band::must_not && in) {
        ++st_.hard_extras;
        note(row * W_, "row " + std::to_string(row) + ": selected index " + std::to_string(t_.to_index(row, p)) + " (score " +
                           detail::exact(tr.score[pu]) + " < kth " + detail::exact(tr.tau) + " - bounds " +
                           detail::fmt(tr.bound[pu] + tr.u_tau) + ")");
      } else if (in && !rset.count(p)) {
        ++st_.swaps;
      }
    }
    st_.band += band;
    st_.max_band = std::max(st_.max_band, band);
    std::int64_t inter = 0;
    for (auto p : sel) inter += rset.count(p) ? 1 : 0;
    const auto uni = static_cast<std::int64_t>(sel.size() + rset.size()) - inter;
    if (plots_) {
      const auto ru = static_cast<std::size_t>(row);
      row_recall_[ru] = rset.empty() ? 1.0f : static_cast<float>(static_cast<double>(inter) / static_cast<double>(rset.size()));
      row_band_[ru] = band;
      row_bad_[ru] = (st_.hard_misses - misses0) + (st_.hard_extras - extras0);
    }
    if (!rset.empty()) {
      const double rec = static_cast<double>(inter) / static_cast<double>(rset.size());
      recall_sum_ += rec;
      jac_sum_ += uni ? static_cast<double>(inter) / static_cast<double>(uni) : 1.0;
      st_.min_recall = std::min(st_.min_recall, rec);
      ++rows_scored_;
    }
    // Index-base hint: picks that are a reference pick shifted by one index value (every pick of the row, not only
    // the ones outside the reference set: one different pick next to a reference pick is no pattern).
    for (auto p : sel) {
      const std::int64_t i0 = t_.to_index(row, p), b0 = t_.from_index(row, i0 - 1), a0 = t_.from_index(row, i0 + 1);
      ++all_picks_;
      all_plus1_ += b0 >= 0 && rset.count(b0) ? 1 : 0;
      all_minus1_ += a0 >= 0 && rset.count(a0) ? 1 : 0;
      if (rset.count(p)) continue;
      ++off_picks_;
      const std::int64_t idx = t_.to_index(row, p);
      const std::int64_t below = t_.from_index(row, idx - 1), above = t_.from_index(row, idx + 1);
      plus1_picks_ += below >= 0 && rset.count(below) ? 1 : 0;
      minus1_picks_ += above >= 0 && rset.count(above) ? 1 : 0;
    }
    return st_.hard_misses == misses0 && st_.hard_extras == extras0;
  }

  void summarize() {
    r_.mismatches = structure_ + st_.hard_misses + st_.hard_extras;
    std::ostringstream m;
    if (structure_) {
      r_.verdict = Verdict::STRUCTURE;
      m << structure_ << " structural violation(s); first: " << first_structure_;
      if (invalid_ && plus1_ == invalid_) m << "; hint: every invalid index is one past a candidate (index base +1?)";
      else if (invalid_ && minus1_ == invalid_) m << "; hint: every invalid index is one before a candidate (index base -1?)";
      else if (invalid_ && relative_ == invalid_) m << "; hint: invalid indices look like relative positions (missing index-base transform?)";
      for (std::size_t b = 0; b < t_.other_bases.size(); ++b)
        if (invalid_ && other_ok_[b] == invalid_) {
          m << "; hint: every invalid index is a candidate under index_base=" << t_.other_bases[b].first << " (wrong index base?)";
          break;
        }
    } else if (st_.hard_misses || st_.hard_extras) {
      r_.verdict = Verdict::FAIL;
      m << st_.hard_misses << " hard miss(es), " << st_.hard_extras << " out-of-band selection(s); first: " << st_.examples.front()
        << "; recall@k " << detail::fmt(st_.recall) << ", jaccard " << detail::fmt(st_.jaccard);
      if (off_picks_ && plus1_picks_ == off_picks_ && all_plus1_ == all_picks_)
        m << "; hint: every pick the reference does not make is one past a reference pick (index base +1?)";
      else if (off_picks_ && minus1_picks_ == off_picks_ && all_minus1_ == all_picks_)
        m << "; hint: every pick the reference does not make is one before a reference pick (index base -1?)";
    } else {
      bool same = true;
      for (std::int64_t i = 0; i < out_.numel() && same; ++i) same = out_.int_at(i) == ref_.value.int_at(i);
      r_.verdict = same ? Verdict::BITEXACT : Verdict::WITHIN_BOUND;
      if (same) m << "identical to the reference (" << R_ << " rows)";
      else
        m << (st_.swaps ? std::to_string(st_.swaps) + " accepted in-band swap(s)" : std::string("same sets, order differs"))
          << "; recall@k " << detail::fmt(st_.recall) << " (min " << detail::fmt(st_.min_recall) << "), jaccard "
          << detail::fmt(st_.jaccard);
    }
    if (nan_rows_) {
      const std::string n = std::to_string(nan_rows_) + " row(s) whose every reference score is NaN (first row " +
                            std::to_string(first_nan_row_) + "): any selection of their candidates is accepted";
      m << "; " << n;
      r_.notes.push_back(n);
    }
    if (r_.verdict != Verdict::STRUCTURE)
    {
      m << "; band " << st_.band << " (max " << st_.max_band << "/row), ";
      if (t_.bounds.defined() && !t_.bounds.empty()) m << "tie bounds: the reference's per-candidate score bounds";
      else m << "tie bound rtol " << detail::fmt(tol_.rtol) << " atol " << detail::fmt(tol_.atol);
    }
    r_.topk = st_;
    r_.message = m.str();
  }

  // Plots (PlotData): per-row recall and band (grouped to <= 2048 points), and the worst rows' score-vs-rank curves.
  std::shared_ptr<const PlotData> make_plot() const {
    auto pd = std::make_shared<PlotData>();
    const std::int64_t step = std::max<std::int64_t>(1, (R_ + 2047) / 2048);
    pd->row_step = step;
    for (std::int64_t r0 = 0; r0 < R_; r0 += step) {
      float rec = 1.0f;
      std::int64_t band = 0;
      for (std::int64_t r = r0; r < std::min(R_, r0 + step); ++r) {
        rec = std::min(rec, row_recall_[static_cast<std::size_t>(r)]);
        band = std::max(band, row_band_[static_cast<std::size_t>(r)]);
      }
      pd->row_recall.push_back(rec);
      pd->row_band.push_back(band);
    }
    // The worst rows: most hard violations, then lowest recall; with none, the widest bands (the tie cloud).
    std::vector<std::int64_t> rows(static_cast<std::size_t>(R_));
    for (std::int64_t r = 0; r < R_; ++r) rows[static_cast<std::size_t>(r)] = r;
    auto key = [&](std::int64_t r) {
      const auto u = static_cast<std::size_t>(r);
      return std::make_tuple(row_bad_[u], -row_recall_[u], row_band_[u], -r);
    };
    std::stable_sort(rows.begin(), rows.end(), [&](std::int64_t a, std::int64_t b) { return key(a) > key(b); });
    for (std::int64_t r : rows) {
      if (pd->rows.size() >= 3) break;
      const TopkRow tr = topk_row(t_, r, tol_);
      if (tr.len <= t_.k || (row_bad_[static_cast<std::size_t>(r)] == 0 && row_band_[static_cast<std::size_t>(r)] == 0 && !pd->rows.empty())) continue;
      pd->rows.push_back(row_plot(r, tr));
    }
    return pd;
  }

  TopkRowPlot row_plot(std::int64_t row, const TopkRow& tr) const {
    TopkRowPlot p;
    p.row = row, p.len = tr.len, p.k = t_.k, p.tau = tr.tau, p.u_tau = tr.u_tau;
    std::vector<std::int64_t> order(static_cast<std::size_t>(tr.len));
    for (std::int64_t q = 0; q < tr.len; ++q) order[static_cast<std::size_t>(q)] = q;
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
      return tr.score[static_cast<std::size_t>(a)] > tr.score[static_cast<std::size_t>(b)];
    });
    std::vector<std::int64_t> rank_of(static_cast<std::size_t>(tr.len));
    for (std::int64_t i = 0; i < tr.len; ++i) rank_of[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] = i;
    std::set<std::int64_t> sel, rset;
    for (std::int64_t i = 0; i < W_; ++i) {
      const auto a = out_.int_at(row * W_ + i), b = ref_.value.int_at(row * W_ + i);
      if (a != -1 && t_.from_index(row, a) >= 0) sel.insert(t_.from_index(row, a));
      if (b != -1 && t_.from_index(row, b) >= 0) rset.insert(t_.from_index(row, b));
    }
    const std::int64_t n = tr.len, samples = std::min<std::int64_t>(n, 600);
    for (std::int64_t j = 0; j < samples; ++j) {
      const std::int64_t rk = samples > 1 ? j * (n - 1) / (samples - 1) : 0;
      p.rank.push_back(rk);
      p.score.push_back(tr.score[static_cast<std::size_t>(order[static_cast<std::size_t>(rk)])]);
    }
    for (std::int64_t q = 0; q < n && p.marks.size() < 2000; ++q) {
      const auto qu = static_cast<std::size_t>(q);
      const bool in = sel.count(q) != 0;
      const int kind = tr.cls[qu] == Band::must && !in ? 1 : tr.cls[qu] == Band::must_not && in ? 2 : in && !rset.count(q) ? 3 : 0;
      if (kind) p.marks.emplace_back(rank_of[qu], kind);
    }
    p.zoom0 = std::max<std::int64_t>(0, t_.k - 24);
    for (std::int64_t rk = p.zoom0; rk < std::min(n, t_.k + 24); ++rk) {
      const std::int64_t q = order[static_cast<std::size_t>(rk)];
      const auto qu = static_cast<std::size_t>(q);
      p.zoom.push_back(tr.score[qu]);
      p.zoom_flag.push_back((sel.count(q) ? 1 : 0) | (tr.cls[qu] == Band::must ? 0 : tr.cls[qu] == Band::band ? 2 : 4));
    }
    return p;
  }

  const Tensor& out_;
  const RefTensor& ref_;
  const Tolerance& tol_;
  const TopkRef& t_;
  const std::int64_t R_;
  const bool plots_;
  std::vector<float> row_recall_;
  std::vector<std::int64_t> row_band_, row_bad_;
  std::int64_t W_ = 0;
  CheckResult r_;
  TopkStats st_;
  std::int64_t structure_ = 0, plus1_ = 0, minus1_ = 0, relative_ = 0, invalid_ = 0;
  std::vector<std::int64_t> other_ok_ = std::vector<std::int64_t>(t_.other_bases.size(), 0);  // invalid but valid there
  std::string first_structure_;
  double recall_sum_ = 0, jac_sum_ = 0;
  std::int64_t rows_scored_ = 0;
  std::int64_t nan_rows_ = 0, first_nan_row_ = -1;
  std::int64_t off_picks_ = 0, plus1_picks_ = 0, minus1_picks_ = 0;  // picks outside the reference set, and shifted ones
  std::int64_t all_picks_ = 0, all_plus1_ = 0, all_minus1_ = 0;      // every pick, and those next to a reference pick
};

}  // namespace

CheckResult compare_topk(const Tensor& out, const RefTensor& ref, const Tolerance& tol, bool plots) {
  return TopkJudge(out, ref, tol, plots).run();
}

}  // namespace dsa::cmp
