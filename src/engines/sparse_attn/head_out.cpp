#include "engines/sparse_attn/head_out.hpp"

#include <cmath>
#include <limits>

#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"

namespace dsa::attn {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kLog2e = 0x1.71547652b82fep0;
}  // namespace

void write_head(const RowView& e, std::int64_t h, std::int64_t dv, const float* sink, const Conventions& cv, const HeadDst& d) {
  const HeadResult& r = e.head(h);
  const double unit = cv.base2 ? kLog2e : 1.0;
  const double s = sink ? static_cast<double>(*sink) : 0.0;
  if (r.lonely) {  // no valid key: out 0 exactly, max -inf, lse by convention
    for (std::int64_t c = 0; d.out && c < dv; ++c) d.out[c] = 0, d.out_m[c] = 0;
    if (d.lse) {
      double l = cv.lonely_lse_pos_inf ? kInf : -kInf;
      if (cv.lse_includes_sink && sink) l = s * unit;
      *d.lse = static_cast<float>(l), *d.lse_m = 0, *d.lse_def = 1;
    }
    if (d.max_logits) *d.max_logits = static_cast<float>(-kInf), *d.max_m = 0, *d.max_def = 1;
    return;
  }
  if (r.nan) {  // a NaN (or +inf) score: out and lse NaN; the kernel's max over NaN is fmax-dependent: undefined
    for (std::int64_t c = 0; d.out && c < dv; ++c) d.out[c] = num::f64_to_bf16(std::numeric_limits<double>::quiet_NaN()), d.out_m[c] = 0;
    if (d.lse) *d.lse = std::numeric_limits<float>::quiet_NaN(), *d.lse_m = 0, *d.lse_def = 1;
    if (d.max_logits) *d.max_logits = 0, *d.max_m = 0, *d.max_def = 0;
    return;
  }
  double f = 1.0, rel = e.out_rel(h);
  if (sink) {
    f = 1.0 / (1.0 + num::det_exp(s - r.lse));
    rel += (num::det_exp(2.0 * r.delta) - 1.0) / 2.0 + 0x1p-20;
  }
  const double* o = e.out(h);
  const double* m = e.mag(h);
  for (std::int64_t c = 0; d.out && c < dv; ++c) {
    d.out[c] = num::f64_to_bf16(o[c] * f);
    d.out_m[c] = m[c] * f * rel + 0x1p-133;
  }
  if (d.lse) {
    double l = r.lse, b = e.lse_bound(h);
    if (cv.lse_includes_sink && sink) {
      l = r.lse + num::det_log(1.0 + num::det_exp(s - r.lse));
      b += 0x1p-21 + 0x1p-22 * std::fabs(l);
    }
    *d.lse = static_cast<float>(l * unit), *d.lse_m = b * unit, *d.lse_def = 1;
  }
  if (d.max_logits) *d.max_logits = static_cast<float>(r.m * unit), *d.max_m = r.max_err * unit, *d.max_def = 1;
}

RefTensor bounded_ref(std::string name, Tensor value, Tensor bound, Tensor defined) {
  RefTensor t;
  t.name = std::move(name);
  t.kind = CompareKind::bounded;
  t.value = std::move(value);
  t.magnitude = std::move(bound);
  t.defined = std::move(defined);
  return t;
}

PeerMetric flashmla_metric(double abs_tol, double rel_tol, double cos_tol) {
  return PeerMetric{"FlashMLA check_is_allclose", abs_tol, rel_tol, 1e-6, cos_tol};
}

}  // namespace dsa::attn
