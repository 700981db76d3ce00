// The per-head scalar steps of the sparse attention row engine (sparse_attn.hpp), shared by the CPU RowEngine and
// the CUDA engine (sparse_attn_cuda.cu): one definition of each operation sequence, compiled for both (determinism
// contract way 3). The dot products and P·V sums are fma chains in a fixed order that both engines keep per element;
// what sits between them -- the bounds of a head, its classification (NaN, lonely), lse -- is here.
#pragma once
#include <cmath>
#include <cstdint>

#include "numerics/det_math.hpp"
#include "numerics/hd.hpp"

namespace dsa::attn {

inline constexpr double kU = 0x1p-23;
DSA_HD inline double gamma_n(double n) { return n * kU / (1.0 - n * kU); }

// Per-head results of one row.
struct HeadResult {
  double m = 0;          // max_t z (natural); -inf when no key (lonely), NaN when a score is NaN
  double lse = 0;        // natural; -inf when lonely
  double L = 0;          // sum of p
  double delta = 0;      // (1) of sparse_attn.hpp
  double max_err = 0;    // (4) (natural)
  bool lonely = false;   // no valid key, or every score -inf
  bool nan = false;      // a score is NaN (or +inf): out, lse are NaN
};

// (1) and (4) of sparse_attn.hpp from the head's |q|^2, the row's max |k|^2, max |z| and the max m.
DSA_HD inline void head_bounds(double sm, double gD, double q2, double kmax2, double zmax, double m, HeadResult& r) {
  const double A = sqrt(q2) * sqrt(kmax2) * (1.0 + 0x1p-40);  // covers the rounding of the sums of squares
  r.delta = fabs(sm) * gD * A + 0x1p-22 * zmax + 0x1p-21;
  r.max_err = fabs(sm) * gD * A + 0x1p-22 * fabs(m);
}

// After the max pass: NaN (a NaN score, or m = +inf) and lonely (m = -inf) heads are final; true when the softmax
// of the head is to be computed (r.m set).
DSA_HD inline bool head_classify(bool nan, double m, HeadResult& r) {
  const double inf = num::detail::inf64();
  if (nan || m == inf) {
    r.nan = true;
    r.m = nan ? num::detail::nan64() : inf;
    r.lse = r.m;
    return false;
  }
  if (m == -inf) {
    r.m = -inf, r.lse = -inf, r.lonely = true;
    return false;
  }
  r.m = m;
  return true;
}

// The head's lse once L = sum_t p_t (increasing t) is known.
DSA_HD inline void head_lse(double L, HeadResult& r) {
  r.L = L;
  r.lse = r.m + num::det_log(L);
}

// (2) without the sink: the relative factor of M, for a row of n keys.
DSA_HD inline double out_rel(const HeadResult& r, double n) {
  const double eta = num::det_exp(2.0 * r.delta) - 1.0;
  return 0x1p-7 + 1.5 * eta + 2.0 * gamma_n(n) + (n / 64.0 + 4.0) * 0x1p-21;
}

// (3): the absolute bound of the natural lse, for a row of n keys.
DSA_HD inline double lse_bound(const HeadResult& r, double n) {
  return r.delta + gamma_n(n) + 0x1p-21 + 0x1p-22 * (fabs(r.lse) + fabs(r.m));
}

// The head's normalized outputs from the raw sums O = sum_t p_t v_t and M = sum_t p_t |v_t| (dv values each): NaN
// heads NaN (M 0), lonely heads 0, else O / L and M / L.
DSA_HD inline void head_finish_one(const HeadResult& r, double& o, double& mg) {
  if (r.nan) o = num::detail::nan64(), mg = 0.0;
  else if (r.lonely) o = 0.0, mg = 0.0;
  else o = o / r.L, mg = mg / r.L;
}

// One row's results, from either engine: H heads, dv normalized outputs and magnitudes per head, n keys; vabs (when
// asked for) = sum_t |k_t[d]| over the row's keys in order, D values.
struct RowView {
  std::int64_t H = 0, dv = 0, n_keys = 0;
  const HeadResult* heads = nullptr;
  const double* O = nullptr;
  const double* M = nullptr;
  const double* vabs = nullptr;
  const HeadResult& head(std::int64_t h) const { return heads[h]; }
  const double* out(std::int64_t h) const { return O + h * dv; }
  const double* mag(std::int64_t h) const { return M + h * dv; }
  std::int64_t n() const { return n_keys; }
  double out_rel(std::int64_t h) const { return attn::out_rel(heads[h], static_cast<double>(n_keys)); }
  double lse_bound(std::int64_t h) const { return attn::lse_bound(heads[h], static_cast<double>(n_keys)); }
};

}  // namespace dsa::attn
