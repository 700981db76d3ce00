// bounded comparator: |out - ref| <= rtol * M + atol per defined element, M from the RefTensor (|ref| if absent).
// Non-finite values must match the reference's pattern; for clean logits the -inf mask must match exactly.
// Metrics (all in double, fixed element order): max abs, max rel, max err/M, max ULP distance at the reference,
// cosine, DeepGEMM calc_diff, msprobe thousandth ratios, and the minimum rtol that passes.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// The systematic-error gate flags a fit this many standard errors from zero (for zero-mean errors P < 2e-5 at the smallest n, 16).
constexpr double kSysSigmas = 6.0;
constexpr std::size_t kWorst = 16;
constexpr std::int64_t kGrid = 512;

}  // namespace

std::uint8_t err_code(double em) {
  if (!(em > 0)) return 1;
  const double l = std::log10(em);
  if (!(l < kPlotLogHi)) return 255;
  if (l <= kPlotLogLo) return 2;
  return static_cast<std::uint8_t>(2 + std::floor((l - kPlotLogLo) / (kPlotLogHi - kPlotLogLo) * 253.0));
}

double err_of_code(std::uint8_t code) {
  if (code <= 1) return 0.0;
  return std::pow(10.0, kPlotLogLo + (code - 2) * (kPlotLogHi - kPlotLogLo) / 253.0);
}

void BoundedAccumulator::collect_plot(std::int64_t rows, std::int64_t cols) {
  plot_ = std::make_shared<PlotData>();
  HeatmapData h;
  h.rows = std::max<std::int64_t>(rows, 1);
  h.cols = std::max<std::int64_t>(cols, 1);
  h.gh = std::min(h.rows, kGrid);
  h.gw = std::min(h.cols, kGrid);
  h.code.assign(static_cast<std::size_t>(h.gh * h.gw), 0);
  h.flag.assign(static_cast<std::size_t>(h.gh * h.gw), 0);
  plot_->heat = std::move(h);
  HistData hist;
  hist.bins.assign(static_cast<std::size_t>((kPlotLogHi - hist.lo) / hist.step), 0);
  plot_->hist = std::move(hist);
  cell_max_.assign(static_cast<std::size_t>(plot_->heat->gh * plot_->heat->gw), -1.0);
}

BoundedAccumulator::BoundedAccumulator(const Tolerance& tol, const RefTensor& ref, DType out_dtype) : tol_(tol), name_(ref.name) {
  int emin = -126;
  detail::ulp_format(out_dtype, p_, emin);
  emin_ = emin;
  s_.ulp_bits = p_;
  for (const auto& pm : ref.peers) peers_.push_back({pm, 0, 0, 0, 0});
  sys_floor_ = ref.systematic_floor;
}

namespace {
// Elements [i0, i0 + n) of t: values (exact decode) and raw bits, typed loops for f32 / bf16, the generic decoder else.
void decode_block(const Tensor& t, std::int64_t i0, std::int64_t n, double* val, std::uint64_t* raw) {
  const std::byte* p = t.raw() + static_cast<std::size_t>(i0) * dtype_size(t.dtype());
  if (t.dtype() == DType::f32) {
    for (std::int64_t k = 0; k < n; ++k) {
      std::uint32_t u;
      std::memcpy(&u, p + 4 * k, 4);
      float f;
      std::memcpy(&f, &u, 4);
      raw[k] = u;
      val[k] = static_cast<double>(f);
    }
  } else if (t.dtype() == DType::bf16) {
    for (std::int64_t k = 0; k < n; ++k) {
      std::uint16_t h;
      std::memcpy(&h, p + 2 * k, 2);
      const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      raw[k] = h;
      val[k] = static_cast<double>(f);
    }
  } else {
    for (std::int64_t k = 0; k < n; ++k) {
      raw[k] = t.bits(i0 + k);
      val[k] = num::decode_bits(t.dtype(), raw[k]);
    }
  }
}
}  // namespace

void BoundedAccumulator::add(const Tensor& out, const RefTensor& ref, const Tensor* against) {
  const Tensor& v = against ? *against : ref.value;
  const std::int64_t off = ref.flat_offset;
  numel_ += v.numel();
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  const bool has_m = ref.magnitude.defined() && ref.magnitude.numel() == v.numel();
  const double* mag = has_m ? ref.magnitude.data<double>() : nullptr;
  const Tolerance& tol = tol_;
  BoundedStats& s = s_;
  // Locations carry the whole output's flat index and meaning (a row tile's element i is element off + i).
  auto loc = [&](std::int64_t i, double err, double bound, bool describe_now) {
    Location l = detail::location(out, v, i, describe_now ? detail::describe(ref, off + i) : std::string(), err, bound);
    l.flat = off + i;
    return l;
  };
  std::optional<Location> worst_here;
  double worst_here_key = -1;
  std::optional<Location> fail_here;
  HeatmapData* heat = plot_ ? &*plot_->heat : nullptr;
  HistData* hist = plot_ ? &*plot_->hist : nullptr;
  // The grid cell of element i (whole-output flat index off + i viewed as [rows, cols]).
  auto cell = [&](std::int64_t i) {
    const std::int64_t f = off + i, r = f / heat->cols, c = f % heat->cols;
    return static_cast<std::size_t>(std::min(r * heat->gh / heat->rows, heat->gh - 1) * heat->gw + c * heat->gw / heat->cols);
  };
  // Blocks of decoded elements (one typed pass per tensor; the element order of every sum is unchanged).
  constexpr std::int64_t kBlock = 2048;
  double ob[kBlock], eb[kBlock];
  std::uint64_t orw[kBlock], erw[kBlock];
  for (std::int64_t b0 = 0; b0 < v.numel(); b0 += kBlock) {
  const std::int64_t nb = std::min(kBlock, v.numel() - b0);
  decode_block(out, b0, nb, ob, orw);
  decode_block(v, b0, nb, eb, erw);
  for (std::int64_t k = 0; k < nb; ++k) {
    const std::int64_t i = b0 + k;
    if (def && !def[i]) continue;
    const double o = ob[k], e = eb[k];
    if (orw[k] == erw[k] && std::isfinite(e)) {
      // The same bits (a passing kernel's common case): err = 0, so only the counts and the peer sums move; the
      // same updates as the general path below, in the same order.
      ++s.compared;
      sxy_ += o * e;
      sxx_ += o * o;
      syy_ += e * e;
      if (sys_floor_ > 0) g_n_ += 1, g_ee_ += e * e, g_eeee_ += e * e * e * e, g_abs_e_ += std::fabs(e);
      ++n_1e3_;
      ++n_5e3_;
      if (heat) {
        double& cm = cell_max_[cell(i)];
        cm = std::max(cm, 0.0);
        ++hist->zero;
      }
      const double M = mag ? mag[i] : std::fabs(e);
      if (std::fabs(e) > tol.rtol * M + tol.atol) ++s.ulp_compared;
      continue;
    }
    if (orw[k] != erw[k] && !(std::isnan(o) && std::isnan(e))) ++bit_diff_;
    if (!std::isfinite(e) || !std::isfinite(o)) {
      const bool same = (std::isnan(e) && std::isnan(o)) || o == e;
      if (same) continue;
      // Locations (with their decoded meaning) are built only when kept: a failing 16M-logit tensor must not
      // format 16M strings.
      const bool mask_issue = ref.mask_must_match && ((e == -kInf && !std::isnan(o)) || (o == -kInf && std::isfinite(e)));
      if (heat) heat->flag[cell(i)] |= mask_issue ? 2 : 1;
      std::optional<Location>& keep = mask_issue ? first_mask_ : first_nf_;
      ++(mask_issue ? mask_ : nonfinite_);
      if (!keep) keep = loc(i, kInf, 0.0, true);
      if (plot_ && plot_->breaks.size() < 16) plot_->breaks.push_back(loc(i, kInf, 0.0, true));
      continue;
    }
    const double M = mag ? mag[i] : std::fabs(e);
    const double err = std::fabs(o - e);
    const double bound = tol.rtol * M + tol.atol;
    ++s.compared;
    sxy_ += o * e;
    sxx_ += o * o;
    syy_ += e * e;
    if (sys_floor_ > 0) {
      const double d = o - e, ee = e * e;
      g_n_ += 1, g_d_ += d, g_dd_ += d * d, g_de_ += d * e, g_ee_ += ee, g_eedd_ += ee * d * d, g_eeed_ += ee * e * d;
      g_eeee_ += ee * ee, g_abs_e_ += std::fabs(e);
    }
    if (bound == 0 && err > 0) zero_bound_ulp_ = std::max(zero_bound_ulp_, err / detail::ulp_at(e, p_, emin_));
    s.max_abs = std::max(s.max_abs, err);
    const double rel = e != 0 ? err / std::fabs(e) : (err == 0 ? 0.0 : kInf);
    s.max_rel = std::max(s.max_rel, rel);
    if (rel < 1e-3) ++n_1e3_;
    if (rel < 5e-3) ++n_5e3_;
    const double em = M > 0 ? err / M : (err == 0 ? 0.0 : kInf);
    s.max_err_over_m = std::max(s.max_err_over_m, em);
    if (heat) {
      double& cm = cell_max_[cell(i)];
      cm = std::max(cm, em);
      if (err == 0) ++hist->zero;
      else if (!(em < 1e3)) ++hist->over;  // 10^kPlotLogHi
      else {
        const double b = std::floor((std::log10(em) - hist->lo) / hist->step);
        if (b < 0) ++hist->below;
        else hist->bins[static_cast<std::size_t>(std::min<double>(b, static_cast<double>(hist->bins.size() - 1)))] += 1;
      }
      if (err > 0 && (top_.size() < kWorst || em > top_.front().first)) {
        auto gt = [](const std::pair<double, Location>& a, const std::pair<double, Location>& b) { return a.first > b.first; };
        if (top_.size() == kWorst) {
          std::pop_heap(top_.begin(), top_.end(), gt);
          top_.pop_back();
        }
        top_.emplace_back(em, loc(i, err, bound, true));
        std::push_heap(top_.begin(), top_.end(), gt);
      }
    }
    // ulps only where |ref| stands above the bound: below it (cancellation, near-zero logits) an ulp of the
    // reference says nothing about the kernel (err/M is the meaningful figure there).
    if (std::fabs(e) > bound) {
      s.max_ulp = std::max(s.max_ulp, err / detail::ulp_at(e, p_, emin_));
      ++s.ulp_compared;
    }
    if (err > tol.atol) s.min_rtol = std::max(s.min_rtol, M > 0 ? (err - tol.atol) / M : kInf);
    if (err > 0 && err <= bound && em > top_pass_key_) top_pass_key_ = em, top_pass_ = loc(i, err, bound, true);
    if (err > bound) {
      ++bound_fail_;
      if (!first_fail_ && !fail_here) fail_here = loc(i, err, bound, false);
      if (em > worst_key_ && em > worst_here_key) {
        worst_here_key = em;
        worst_here = loc(i, err, bound, false);
      }
    }
  }
  }

  for (auto* l : {&fail_here, &worst_here})
    if (*l) (*l)->where = detail::describe(ref, (*l)->flat);
  if (fail_here) first_fail_ = fail_here;
  if (worst_here) worst_ = worst_here, worst_key_ = worst_here_key;
  for (auto& pa : peers_) {
    const PeerMetric& pm = pa.pm;
    for (std::int64_t b0 = 0; b0 < v.numel(); b0 += kBlock) {
    const std::int64_t nb = std::min(kBlock, v.numel() - b0);
    decode_block(out, b0, nb, ob, orw);
    decode_block(v, b0, nb, eb, erw);
    for (std::int64_t k = 0; k < nb; ++k) {
      const std::int64_t i = b0 + k;
      if (def && !def[i]) continue;
      const double o = ob[k], e = eb[k];
      if (!std::isfinite(e) || !std::isfinite(o)) {
        pa.beyond += !((std::isnan(e) && std::isnan(o)) || o == e);
        continue;
      }
      const double d = std::fabs(o - e);
      pa.beyond += !(d < pm.abs_tol || d / (std::fabs(e) + pm.rel_eps) < pm.rel_tol);
      pa.xy += o * e, pa.xx += o * o, pa.yy += e * e;
    }
    }
  }
}

CheckResult BoundedAccumulator::finish() const {
  CheckResult r;
  r.kind = CompareKind::bounded;
  r.tensor = name_;
  r.tol = tol_;
  r.numel = numel_;
  const Tolerance& tol = tol_;
  BoundedStats s = s_;
  if (s.compared > 0) {
    s.ratio_rel_1e3 = static_cast<double>(n_1e3_) / static_cast<double>(s.compared);
    s.ratio_rel_5e3 = static_cast<double>(n_5e3_) / static_cast<double>(s.compared);
  }
  const double den = sxx_ + syy_;
  s.calc_diff = den == 0 ? 0.0 : 1.0 - 2.0 * sxy_ / den;
  s.cosine = (sxx_ == 0 && syy_ == 0) ? 1.0 : (sxx_ == 0 || syy_ == 0) ? 0.0 : sxy_ / std::sqrt(sxx_ * syy_);
  r.bounded = s;
  r.mismatches = nonfinite_ + mask_ + bound_fail_;
  if (plot_) {
    auto pd = std::make_shared<PlotData>(*plot_);
    for (std::size_t c = 0; c < cell_max_.size(); ++c) pd->heat->code[c] = cell_max_[c] < 0 ? 0 : err_code(cell_max_[c]);
    auto t = top_;
    std::sort(t.begin(), t.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (auto& [em, l] : t) pd->worst.push_back(l);
    r.plot = std::move(pd);
  }

  // The systematic-error gate: least-squares scale b (d = b e) and offset a (d = a), each with its standard error
  // computed from the residuals; flagged when above the floor and kSysSigmas standard errors from zero.
  std::string systematic;
  if (sys_floor_ > 0 && g_n_ >= 16 && g_ee_ > 0) {
    const double b = g_de_ / g_ee_;
    const double rss_b = std::max(0.0, g_eedd_ - 2 * b * g_eeed_ + b * b * g_eeee_);
    const double se_b = std::sqrt(rss_b) / g_ee_;
    const double a = g_d_ / g_n_, mean_e = g_abs_e_ / g_n_;
    const double se_a = std::sqrt(std::max(0.0, g_dd_ - g_n_ * a * a)) / g_n_;
    std::ostringstream g;
    if (std::fabs(b) > sys_floor_ && std::fabs(b) > kSysSigmas * se_b)
      g << "systematic scale error: out = ref x (1 " << (b < 0 ? "- " : "+ ") << detail::fmt(std::fabs(b)) << ") fitted over "
        << static_cast<std::int64_t>(g_n_) << " elements (standard error " << detail::fmt(se_b) << "), above the gate "
        << detail::fmt(sys_floor_);
    else if (mean_e > 0 && std::fabs(a) > sys_floor_ * mean_e && std::fabs(a) > kSysSigmas * se_a)
      g << "systematic offset: out = ref " << (a < 0 ? "- " : "+ ") << detail::fmt(std::fabs(a)) << " fitted over "
        << static_cast<std::int64_t>(g_n_) << " elements (standard error " << detail::fmt(se_a) << "), above the gate "
        << detail::fmt(sys_floor_) << " x mean |ref| = " << detail::fmt(sys_floor_ * mean_e);
    systematic = g.str();
    if (systematic.empty())
      r.notes.push_back("systematic-error gate: scale " + detail::fmt(b) + " (standard error " + detail::fmt(se_b) + "), offset " +
                        detail::fmt(a) + " (standard error " + detail::fmt(se_a) + ") over " +
                        std::to_string(static_cast<std::int64_t>(g_n_)) + " elements; floor " + detail::fmt(sys_floor_));
  }

  std::ostringstream m;
  auto metrics = [&] {
    if (zero_bound_ulp_ > 0 && !(s.max_err_over_m < kInf)) {
      m << "exact required where the bound is 0, off by " << detail::fmt(zero_bound_ulp_) << " ulp; max abs " << detail::fmt(s.max_abs);
      return;
    }
    m << "max err/M " << detail::fmt(s.max_err_over_m) << ", max abs " << detail::fmt(s.max_abs) << ", max ulp "
      << detail::fmt(s.max_ulp) << ", calc_diff " << detail::fmt(s.calc_diff) << "; rtol "
      << detail::fmt(tol.rtol) << (tol.profile.empty() ? "" : " (" + tol.profile + ")") << ", min passing rtol "
      << detail::fmt(s.min_rtol);
  };
  if (nonfinite_) {
    r.verdict = Verdict::NONFINITE;
    r.first = first_nf_;
    r.worst = first_nf_;
    m << nonfinite_ << " element(s) non-finite where the reference is not (or the NaN/inf pattern differs); first at "
      << detail::loc_str(*first_nf_);
  } else if (mask_) {
    r.verdict = Verdict::MASK_MISMATCH;
    r.first = first_mask_;
    r.worst = first_mask_;
    m << mask_ << " element(s) break the -inf mask; first at " << detail::loc_str(*first_mask_);
  } else if (bound_fail_) {
    r.verdict = Verdict::FAIL;
    r.first = first_fail_;
    r.worst = worst_;
    m << bound_fail_ << " of " << s.compared << " element(s) outside the bound; first at " << detail::loc_str(*first_fail_)
      << "; worst at " << detail::loc_str(*worst_) << "; ";
    metrics();
  } else if (bit_diff_ == 0) {
    r.verdict = Verdict::BITEXACT;
    m << "bit-exact (" << s.compared << " defined finite elements)";
  } else if (!systematic.empty()) {
    // Every element within its bound, but the errors share a sign: a shifted kernel (a wrong constant, a missing
    // factor) that the per-element worst case is too wide to see.
    r.verdict = Verdict::FAIL;
    r.first = top_pass_;
    r.worst = top_pass_;
    m << systematic << "; every element is within its bound (";
    metrics();
    m << ")";
    if (top_pass_) m << "; worst at " << detail::loc_str(*top_pass_);
  } else {
    r.verdict = Verdict::WITHIN_BOUND;
    r.worst = top_pass_;
    metrics();
    if (top_pass_) m << "; worst at " << detail::loc_str(*top_pass_);
  }
  if (r.verdict != Verdict::BITEXACT && r.verdict != Verdict::WITHIN_BOUND && r.verdict != Verdict::FAIL && s.compared)
    m << "; finite part: max err/M " << detail::fmt(s.max_err_over_m);
  for (const auto& pa : peers_) {
    const PeerMetric& pm = pa.pm;
    const double cd = pa.xx + pa.yy == 0 ? 0.0 : 1.0 - 2.0 * pa.xy / (pa.xx + pa.yy);
    const bool use_cos = pm.cos_tol >= 0;
    std::ostringstream pmsg;
    pmsg << pm.name << " (abs " << detail::fmt(pm.abs_tol) << ", rel " << detail::fmt(pm.rel_tol);
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(pm.cos_tol);
    pmsg << "): " << (pa.beyond == 0 && (!use_cos || cd <= pm.cos_tol) ? "within" : "over") << " its tolerance, "
         << pa.beyond << " element(s) beyond abs/rel";
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(cd);
    m << "; " << pmsg.str();
    r.notes.push_back("for information: " + pmsg.str());
  }
  r.message = m.str();
  return r;
}

CheckResult compare_bounded(const Tensor& out, const RefTensor& ref, const Tolerance& tol, const Tensor* against) {
  BoundedAccumulator a(tol, ref, out.dtype());
  a.add(out, ref, against);
  return a.finish();
}

}  // namespace dsa::cmp
