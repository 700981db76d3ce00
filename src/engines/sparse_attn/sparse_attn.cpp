#include "engines/sparse_attn/sparse_attn.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "numerics/det_math.hpp"

namespace dsa::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- generic micro-kernels: the reference order, scalar fma ----
void qk_generic(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S) {
  for (std::int64_t p = 0; p < np / 8; ++p)
    for (std::int64_t h = 0; h < Hp; ++h) {
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const double* q = Q + h * D;
      const double* k = Kp + p * D * 8;
      for (std::int64_t d = 0; d < D; ++d)
        for (int x = 0; x < 8; ++x) acc[x] = std::fma(q[d], k[d * 8 + x], acc[x]);
      for (int x = 0; x < 8; ++x) S[h * np + p * 8 + x] = acc[x];
    }
}

void pv_generic(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n, std::int64_t dv,
                bool abs_v, double* O) {
  for (std::int64_t h = 0; h < Hp; ++h)
    for (std::int64_t c = 0; c < dv; ++c) {
      double acc = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        const double v = Vp[((c / 8) * n + t) * 8 + c % 8];
        acc = std::fma(P[h * ldp + t], abs_v ? std::fabs(v) : v, acc);
      }
      O[h * dv + c] = acc;
    }
}

// ---- AVX2 + FMA: 4 heads x 8 columns per micro-tile, the same fma chain per element ----
__attribute__((target("avx2,fma"))) void qk_avx2(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np,
                                                  std::int64_t D, double* S) {
  // Groups of 6 key panels (6 * 8 * D doubles: ~220 KB at D = 576, L2-resident) reused by every head block.
  const std::int64_t panels = np / 8;
  for (std::int64_t g = 0; g < panels; g += 6)
    for (std::int64_t h = 0; h < Hp; h += 4)
      for (std::int64_t p = g; p < std::min(panels, g + 6); ++p) {
      const double* k = Kp + p * D * 8;
      __m256d a00 = _mm256_setzero_pd(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
      const double *q0 = Q + h * D, *q1 = q0 + D, *q2 = q1 + D, *q3 = q2 + D;
      for (std::int64_t d = 0; d < D; ++d) {
        const __m256d k0 = _mm256_loadu_pd(k + d * 8), k1 = _mm256_loadu_pd(k + d * 8 + 4);
        __m256d b = _mm256_broadcast_sd(q0 + d);
        a00 = _mm256_fmadd_pd(b, k0, a00);
        a01 = _mm256_fmadd_pd(b, k1, a01);
        b = _mm256_broadcast_sd(q1 + d);
        a10 = _mm256_fmadd_pd(b, k0, a10);
        a11 = _mm256_fmadd_pd(b, k1, a11);
        b = _mm256_broadcast_sd(q2 + d);
        a20 = _mm256_fmadd_pd(b, k0, a20);
        a21 = _mm256_fmadd_pd(b, k1, a21);
        b = _mm256_broadcast_sd(q3 + d);
        a30 = _mm256_fmadd_pd(b, k0, a30);
        a31 = _mm256_fmadd_pd(b, k1, a31);
      }
      double* s = S + h * np + p * 8;
      _mm256_storeu_pd(s, a00);
      _mm256_storeu_pd(s + 4, a01);
      _mm256_storeu_pd(s + np, a10);
      _mm256_storeu_pd(s + np + 4, a11);
      _mm256_storeu_pd(s + 2 * np, a20);
      _mm256_storeu_pd(s + 2 * np + 4, a21);
      _mm256_storeu_pd(s + 3 * np, a30);
      _mm256_storeu_pd(s + 3 * np + 4, a31);
    }
}

template <bool Abs>
__attribute__((target("avx2,fma"))) void pv_avx2(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp,
                                                  std::int64_t n, std::int64_t dv, double* O) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  // Keys in chunks of 256 (a 4-head P block 8 KB, a V block 16 KB: L1-resident); the accumulators go through O
  // between chunks (exact stores and loads: each element's fma chain over t is the same as without chunks).
  for (std::int64_t t0 = 0; t0 < n; t0 += 256)
  for (std::int64_t c = 0; c < dv; c += 8)
    for (std::int64_t h = 0; h < Hp; h += 4) {
      const double* V = Vp + (c / 8) * n * 8;
      double* o = O + h * dv + c;
      __m256d a00, a01, a10, a11, a20, a21, a30, a31;
      if (t0 == 0) {
        a00 = _mm256_setzero_pd(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;
      } else {
        a00 = _mm256_loadu_pd(o), a01 = _mm256_loadu_pd(o + 4), a10 = _mm256_loadu_pd(o + dv), a11 = _mm256_loadu_pd(o + dv + 4);
        a20 = _mm256_loadu_pd(o + 2 * dv), a21 = _mm256_loadu_pd(o + 2 * dv + 4), a30 = _mm256_loadu_pd(o + 3 * dv);
        a31 = _mm256_loadu_pd(o + 3 * dv + 4);
      }
      const double *p0 = P + h * ldp, *p1 = p0 + ldp, *p2 = p1 + ldp, *p3 = p2 + ldp;
      const std::int64_t t1 = std::min(n, t0 + 256);
      for (std::int64_t t = t0; t < t1; ++t) {
        __m256d v0 = _mm256_loadu_pd(V + t * 8), v1 = _mm256_loadu_pd(V + t * 8 + 4);
        if (Abs) {
          v0 = _mm256_andnot_pd(sign, v0);
          v1 = _mm256_andnot_pd(sign, v1);
        }
        __m256d b = _mm256_broadcast_sd(p0 + t);
        a00 = _mm256_fmadd_pd(b, v0, a00);
        a01 = _mm256_fmadd_pd(b, v1, a01);
        b = _mm256_broadcast_sd(p1 + t);
        a10 = _mm256_fmadd_pd(b, v0, a10);
        a11 = _mm256_fmadd_pd(b, v1, a11);
        b = _mm256_broadcast_sd(p2 + t);
        a20 = _mm256_fmadd_pd(b, v0, a20);
        a21 = _mm256_fmadd_pd(b, v1, a21);
        b = _mm256_broadcast_sd(p3 + t);
        a30 = _mm256_fmadd_pd(b, v0, a30);
        a31 = _mm256_fmadd_pd(b, v1, a31);
      }
      _mm256_storeu_pd(o, a00);
      _mm256_storeu_pd(o + 4, a01);
      _mm256_storeu_pd(o + dv, a10);
      _mm256_storeu_pd(o + dv + 4, a11);
      _mm256_storeu_pd(o + 2 * dv, a20);
      _mm256_storeu_pd(o + 2 * dv + 4, a21);
      _mm256_storeu_pd(o + 3 * dv, a30);
      _mm256_storeu_pd(o + 3 * dv + 4, a31);
    }
}

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

}  // namespace

void gemm_qk(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S, bool generic) {
  if (!generic && have_avx2()) qk_avx2(Q, Hp, Kp, np, D, S);
  else qk_generic(Q, Hp, Kp, np, D, S);
}

void gemm_pv(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n, std::int64_t dv,
             bool abs_v, double* O, bool generic) {
  if (!generic && have_avx2()) (abs_v ? pv_avx2<true> : pv_avx2<false>)(P, Hp, ldp, Vp, n, dv, O);
  else pv_generic(P, Hp, ldp, Vp, n, dv, abs_v, O);
}

void RowEngine::reset(std::int64_t H, std::int64_t D, std::int64_t dv, std::int64_t n) {
  H_ = H, D_ = D, dv_ = dv, n_ = n;
  Hp_ = (H + 3) / 4 * 4;
  np_ = (n + 7) / 8 * 8;
  Q_.assign(static_cast<std::size_t>(Hp_ * D), 0.0);
  K_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * D));
  res_.assign(static_cast<std::size_t>(H), HeadResult{});
}

void RowEngine::run(double sm) {
  const std::int64_t H = H_, D = D_, dv = dv_, n = n_, np = np_, Hp = Hp_;
  O_.assign(static_cast<std::size_t>(Hp * dv), 0.0);
  M_.assign(static_cast<std::size_t>(Hp * dv), 0.0);
  if (n == 0) {
    for (auto& r : res_) r.m = -kInf, r.lse = -kInf, r.lonely = true;
    return;
  }
  // Pack K^T panels (zero keys past n) and compute the key norms for the bound.
  Kp_.assign(static_cast<std::size_t>(np * D), 0.0);
  double kmax2 = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const double* k = K_.data() + t * D;
    double* dst = Kp_.data() + (t / 8) * D * 8 + t % 8;
    double s2 = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      dst[d * 8] = k[d];
      s2 += k[d] * k[d];
    }
    kmax2 = s2 > kmax2 || s2 != s2 ? s2 : kmax2;
  }
  // V packed in 8-column blocks, key-major inside a block (contiguous streams for the PV micro-kernel).
  Vp_.resize(static_cast<std::size_t>(dv * n));
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t c = 0; c < dv; ++c) Vp_[static_cast<std::size_t>(((c / 8) * n + t) * 8 + c % 8)] = K_[static_cast<std::size_t>(t * D + c)];
  // Heads in blocks of 64: the score workspace stays 64 x topk whatever h_q is (the per-element order is unchanged).
  const std::int64_t HB = 64;
  S_.resize(static_cast<std::size_t>(std::min(Hp, HB) * np));
  const double gD = gamma_n(static_cast<double>(D));
  for (std::int64_t h0 = 0; h0 < Hp; h0 += HB) {
    const std::int64_t hb = std::min(HB, Hp - h0);
    gemm_qk(Q_.data() + h0 * D, hb, Kp_.data(), np, D, S_.data());
    for (std::int64_t h = h0; h < h0 + hb; ++h) {
      double* s = S_.data() + (h - h0) * np;
      if (h >= H) {
        std::fill(s, s + np, 0.0);
        continue;
      }
      HeadResult& r = res_[static_cast<std::size_t>(h)];
      double m = -kInf, zmax = 0;
      bool nan = false;
      for (std::int64_t t = 0; t < n; ++t) {
        const double z = sm * s[t];
        s[t] = z;
        nan |= z != z;
        m = z > m ? z : m;
        zmax = std::max(zmax, std::fabs(z));
      }
      double q2 = 0;
      for (std::int64_t d = 0; d < D; ++d) q2 += Q_[static_cast<std::size_t>(h * D + d)] * Q_[static_cast<std::size_t>(h * D + d)];
      head_bounds(sm, gD, q2, kmax2, zmax, m, r);
      if (!head_classify(nan, m, r)) {
        std::fill(s, s + np, 0.0);
        continue;
      }
      double L = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        s[t] = num::det_exp(s[t] - m);
        L += s[t];
      }
      for (std::int64_t t = n; t < np; ++t) s[t] = 0;
      head_lse(L, r);
    }
    gemm_pv(S_.data(), hb, np, Vp_.data(), n, dv, false, O_.data() + h0 * dv);
    gemm_pv(S_.data(), hb, np, Vp_.data(), n, dv, true, M_.data() + h0 * dv);
  }
  for (std::int64_t h = 0; h < H; ++h) head_finish(res_[static_cast<std::size_t>(h)], dv, O_.data() + h * dv, M_.data() + h * dv);
}

}  // namespace dsa::attn
