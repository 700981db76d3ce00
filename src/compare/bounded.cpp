// bounded comparator: |out - ref| <= rtol * M + atol per defined element, M from the RefTensor (|ref| if absent).
// Non-finite values must match the reference's pattern; for clean logits the -inf mask must match exactly.
// Metrics (all in double, fixed element order): max abs, max rel, max err/M, max ULP distance at the reference,
// cosine, DeepGEMM calc_diff, msprobe thousandth ratios, and the minimum rtol that passes.
#include <cmath>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

CheckResult compare_bounded(const Tensor& out, const RefTensor& ref, const Tolerance& tol, const Tensor* against) {
  CheckResult r;
  r.kind = CompareKind::bounded;
  r.tensor = ref.name;
  r.tol = tol;
  const Tensor& v = against ? *against : ref.value;
  r.numel = v.numel();
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  const bool has_m = ref.magnitude.defined() && ref.magnitude.numel() == v.numel();
  const double* mag = has_m ? ref.magnitude.data<double>() : nullptr;
  int p = 24, emin = -126;
  detail::ulp_format(out.dtype(), p, emin);

  BoundedStats s;
  s.ulp_bits = p;
  std::int64_t nonfinite = 0, mask = 0, bound_fail = 0, bit_diff = 0, n_1e3 = 0, n_5e3 = 0;
  double sxy = 0, sxx = 0, syy = 0, worst_key = -1;
  std::optional<Location> first_nf, first_mask, first_fail, worst;
  for (std::int64_t i = 0; i < v.numel(); ++i) {
    if (def && !def[i]) continue;
    const double o = out.value(i), e = v.value(i);
    if (out.bits(i) != v.bits(i) && !(std::isnan(o) && std::isnan(e))) ++bit_diff;
    if (!std::isfinite(e) || !std::isfinite(o)) {
      const bool same = (std::isnan(e) && std::isnan(o)) || o == e;
      if (same) continue;
      // Locations (with their decoded meaning) are built only when kept: a failing 16M-logit tensor must not
      // format 16M strings.
      const bool mask_issue = ref.mask_must_match && ((e == -kInf && !std::isnan(o)) || (o == -kInf && std::isfinite(e)));
      std::optional<Location>& keep = mask_issue ? first_mask : first_nf;
      ++(mask_issue ? mask : nonfinite);
      if (!keep) keep = detail::location(out, v, i, detail::describe(ref, i), kInf, 0.0);
      continue;
    }
    const double M = mag ? mag[i] : std::fabs(e);
    const double err = std::fabs(o - e);
    const double bound = tol.rtol * M + tol.atol;
    ++s.compared;
    sxy += o * e;
    sxx += o * o;
    syy += e * e;
    s.max_abs = std::max(s.max_abs, err);
    const double rel = e != 0 ? err / std::fabs(e) : (err == 0 ? 0.0 : kInf);
    s.max_rel = std::max(s.max_rel, rel);
    if (rel < 1e-3) ++n_1e3;
    if (rel < 5e-3) ++n_5e3;
    const double em = M > 0 ? err / M : (err == 0 ? 0.0 : kInf);
    s.max_err_over_m = std::max(s.max_err_over_m, em);
    // ulps only where |ref| stands above the bound: below it (cancellation, near-zero logits) an ulp of the
    // reference says nothing about the kernel (err/M is the meaningful figure there).
    if (std::fabs(e) > bound) {
      s.max_ulp = std::max(s.max_ulp, err / detail::ulp_at(e, p, emin));
      ++s.ulp_compared;
    }
    if (err > tol.atol) s.min_rtol = std::max(s.min_rtol, M > 0 ? (err - tol.atol) / M : kInf);
    if (err > bound) {
      ++bound_fail;
      if (!first_fail) first_fail = detail::location(out, v, i, {}, err, bound);
      if (em > worst_key) {
        worst_key = em;
        worst = detail::location(out, v, i, {}, err, bound);
      }
    }
  }
  for (auto* l : {&first_fail, &worst})
    if (*l) (*l)->where = detail::describe(ref, (*l)->flat);
  if (s.compared > 0) {
    s.ratio_rel_1e3 = static_cast<double>(n_1e3) / static_cast<double>(s.compared);
    s.ratio_rel_5e3 = static_cast<double>(n_5e3) / static_cast<double>(s.compared);
  }
  const double den = sxx + syy;
  s.calc_diff = den == 0 ? 0.0 : 1.0 - 2.0 * sxy / den;
  s.cosine = (sxx == 0 && syy == 0) ? 1.0 : (sxx == 0 || syy == 0) ? 0.0 : sxy / std::sqrt(sxx * syy);
  r.bounded = s;
  r.mismatches = nonfinite + mask + bound_fail;

  std::ostringstream m;
  auto metrics = [&] {
    m << "max err/M " << detail::fmt(s.max_err_over_m) << ", max abs " << detail::fmt(s.max_abs) << ", max ulp "
      << detail::fmt(s.max_ulp) << ", calc_diff " << detail::fmt(s.calc_diff) << "; rtol "
      << detail::fmt(tol.rtol) << (tol.profile.empty() ? "" : " (" + tol.profile + ")") << ", min passing rtol "
      << detail::fmt(s.min_rtol);
  };
  if (nonfinite) {
    r.verdict = Verdict::NONFINITE;
    r.first = first_nf;
    r.worst = first_nf;
    m << nonfinite << " element(s) non-finite where the reference is not (or the NaN/inf pattern differs); first at "
      << detail::loc_str(*first_nf);
  } else if (mask) {
    r.verdict = Verdict::MASK_MISMATCH;
    r.first = first_mask;
    r.worst = first_mask;
    m << mask << " element(s) break the -inf mask; first at " << detail::loc_str(*first_mask);
  } else if (bound_fail) {
    r.verdict = Verdict::FAIL;
    r.first = first_fail;
    r.worst = worst;
    m << bound_fail << " of " << s.compared << " element(s) outside the bound; first at " << detail::loc_str(*first_fail)
      << "; worst at " << detail::loc_str(*worst) << "; ";
    metrics();
  } else if (bit_diff == 0) {
    r.verdict = Verdict::BITEXACT;
    m << "bit-exact (" << s.compared << " defined finite elements)";
  } else {
    r.verdict = Verdict::WITHIN_BOUND;
    metrics();
  }
  if (r.verdict != Verdict::BITEXACT && r.verdict != Verdict::WITHIN_BOUND && r.verdict != Verdict::FAIL && s.compared)
    m << "; finite part: max err/M " << detail::fmt(s.max_err_over_m);
  for (const auto& pm : ref.peers) {
    std::int64_t beyond = 0;
    double pxy = 0, pxx = 0, pyy = 0;
    for (std::int64_t i = 0; i < v.numel(); ++i) {
      if (def && !def[i]) continue;
      const double o = out.value(i), e = v.value(i);
      if (!std::isfinite(e) || !std::isfinite(o)) {
        beyond += !((std::isnan(e) && std::isnan(o)) || o == e);
        continue;
      }
      const double d = std::fabs(o - e);
      beyond += !(d < pm.abs_tol || d / (std::fabs(e) + pm.rel_eps) < pm.rel_tol);
      pxy += o * e, pxx += o * o, pyy += e * e;
    }
    const double cd = pxx + pyy == 0 ? 0.0 : 1.0 - 2.0 * pxy / (pxx + pyy);
    const bool use_cos = pm.cos_tol >= 0;
    std::ostringstream pmsg;
    pmsg << pm.name << " (abs " << detail::fmt(pm.abs_tol) << ", rel " << detail::fmt(pm.rel_tol);
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(pm.cos_tol);
    pmsg << "): " << (beyond == 0 && (!use_cos || cd <= pm.cos_tol) ? "pass" : "fail") << ", " << beyond
         << " element(s) beyond abs/rel";
    if (use_cos) pmsg << ", cos_diff " << detail::fmt(cd);
    m << "; " << pmsg.str();
    r.notes.push_back("for information: " + pmsg.str());
  }
  r.message = m.str();
  return r;
}

}  // namespace dsa::cmp
