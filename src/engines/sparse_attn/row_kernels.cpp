// The row engine's kernels (sparse_attn.hpp, RowEngine::run) in its transposed layout: keys row-major as decoded
// (K[t][d], V = the first dv dims of each key row), the queries packed per head block as Qt[d][h], scores and weights
// as St[t][h] -- so no key is ever repacked, and every per-head pass (max, exp, the sum L) runs down the key axis with
// 4 or 8 heads side by side in one vector. Generic, AVX2 + FMA and AVX-512F paths; every element keeps the operation
// chain of the reference order (sparse_attn.hpp), so all paths give identical bits:
//   St[t][h] = fma chain over d increasing from +0;  O[h][c], M[h][c] = fma chains of p v and p |v| over t increasing;
//   z = sm * s; m = (z > m ? z : m); zmax = (zmax < |z| ? |z| : zmax); NaN sticky; p = det_exp(z - m) lane by lane;
//   L = L + p over t increasing; |k_t|^2 = acc + k * k over d increasing (mul, then add).
//
// Blocking: QK runs key blocks of 48 rows x dim chunks of 64 (the Qt chunk of a 64-head block is 32 KB and stays in L1
// while the key rows stream past) with a tile of 3 keys x 64 heads (24 accumulators, each Qt vector loaded once for
// its 3 uses); PV runs key chunks of 64 (each key row sits on its own page: few pages in flight) with tiles of
// 6 heads x 16 columns on AVX-512 (24 accumulators; |V| of the chunk's 16-column slice taken once into a small buffer,
// not once per head group: the and-masks competed with the FMAs for their ports) and 6 heads x 4 columns on AVX2
// (12 accumulators), O and M together (one load of V for both). Between chunks the
// accumulators go through the output (exact stores and loads: the chain is the same as without chunks). The strides
// the engine picks (key rows, St rows, O rows) are odd numbers of cache lines, so a column slice spreads over all L1
// sets.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "engines/sparse_attn/sparse_attn.hpp"
#include "numerics/det_math.hpp"

namespace dsa::attn {
namespace {

using i64 = std::int64_t;

// ---- generic: the reference order, scalar ----
void qkt_generic(const double* K, i64 ldk, i64 n, const double* Qt, i64 hb, i64 D, double* St, i64 lds) {
  for (i64 t = 0; t < n; ++t)
    for (i64 h = 0; h < hb; ++h) {
      double acc = 0;
      for (i64 d = 0; d < D; ++d) acc = std::fma(K[t * ldk + d], Qt[d * hb + h], acc);
      St[t * lds + h] = acc;
    }
}

void pvt_generic(const double* Pt, i64 ldp, i64 hb, i64 n, const double* V, i64 ldv, i64 dv, double* O, double* M, i64 ldo, bool acc) {
  for (i64 h = 0; h < hb; ++h)
    for (i64 c = 0; c < dv; ++c) {
      double o = acc ? O[h * ldo + c] : 0.0, m = acc ? M[h * ldo + c] : 0.0;
      for (i64 t = 0; t < n; ++t) {
        const double p = Pt[t * ldp + h], v = V[t * ldv + c];
        o = std::fma(p, v, o);
        m = std::fma(p, std::fabs(v), m);
      }
      O[h * ldo + c] = o, M[h * ldo + c] = m;
    }
}

void scan_generic(double* St, i64 lds, i64 n, i64 hb, double sm, double* m, double* zmax, unsigned char* nan) {
  for (i64 h = 0; h < hb; ++h) {
    double mh = -num::detail::inf64(), zh = 0;
    bool nh = false;
    for (i64 t = 0; t < n; ++t) {
      const double z = sm * St[t * lds + h];
      St[t * lds + h] = z;
      nh |= z != z;
      mh = z > mh ? z : mh;
      zh = zh < std::fabs(z) ? std::fabs(z) : zh;
    }
    m[h] = mh, zmax[h] = zh, nan[h] = nh;
  }
}

void exp_generic(double* St, i64 lds, i64 n, i64 hb, const double* m, const unsigned char* keep, double* L) {
  for (i64 h = 0; h < hb; ++h) {
    double l = 0;
    for (i64 t = 0; t < n; ++t) {
      const double p = keep[h] ? num::det_exp(St[t * lds + h] - m[h]) : 0.0;
      St[t * lds + h] = p;
      l += p;
    }
    L[h] = l;
  }
}

void norms_generic(const double* K, i64 ldk, i64 t0, i64 n, i64 D, double* s2) {
  for (i64 t = t0; t < n; ++t) {
    double acc = 0;
    for (i64 d = 0; d < D; ++d) acc += K[t * ldk + d] * K[t * ldk + d];
    s2[t] = acc;
  }
}

// det_exp's coefficients, 1/13! down to 1/0! (Horner order).
constexpr double kExpC[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                              1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,
                              1.0 / 6.0,          0.5,               1.0,               1.0};

#if defined(__x86_64__)
// ---- AVX2 + FMA: 4 heads a vector ----
// det_exp lane by lane (numerics/det_math.hpp's operations: the shifter's k, Cody-Waite r, Horner from 1/13!, 2^k as
// two exact powers of two; NaN, > 709.8 and < -746 by blends). k's halves: k1 = trunc(k / 2) (exact, as the integer
// division), k2 = k - k1; 2^j from the bits of j + 1023 + 1.5 * 2^52 shifted into the exponent.
__attribute__((target("avx2,fma"), always_inline)) inline __m256d exp4(__m256d x) {
  const __m256d sh = _mm256_set1_pd(0x1.8p52), bias = _mm256_set1_pd(1023.0);
  const __m256d k = _mm256_sub_pd(_mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(0x1.71547652b82fep0)), sh), sh);
  const __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(k, _mm256_set1_pd(0x1.62e42fefa3800p-1))),
                                  _mm256_mul_pd(k, _mm256_set1_pd(0x1.ef35793c7673p-45)));
  __m256d p = _mm256_set1_pd(kExpC[0]);
  for (int i = 1; i < 14; ++i) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kExpC[i]));
  const __m256d k1 = _mm256_round_pd(_mm256_mul_pd(k, _mm256_set1_pd(0.5)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), k2 = _mm256_sub_pd(k, k1);
  const __m256d e1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(_mm256_add_pd(k1, bias), sh)), 52));
  const __m256d e2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(_mm256_add_pd(k2, bias), sh)), 52));
  __m256d y = _mm256_mul_pd(_mm256_mul_pd(p, e1), e2);
  y = _mm256_blendv_pd(y, _mm256_set1_pd(num::detail::inf64()), _mm256_cmp_pd(x, _mm256_set1_pd(709.8), _CMP_GT_OQ));
  y = _mm256_blendv_pd(y, _mm256_setzero_pd(), _mm256_cmp_pd(x, _mm256_set1_pd(-746.0), _CMP_LT_OQ));
  return _mm256_blendv_pd(y, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
}

// QK tile: NT keys x NV head vectors, dims [d0, d1).
template <int NT, int NV>
__attribute__((target("avx2,fma"), always_inline)) inline void qkt_tile2(const double* K, i64 ldk, const double* Qt, i64 hb, i64 d0, i64 d1,
                                                                        double* St, i64 lds) {
  __m256d a[NT][NV];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) a[t][j] = d0 == 0 ? _mm256_setzero_pd() : _mm256_loadu_pd(St + t * lds + j * 4);
  for (i64 d = d0; d < d1; ++d) {
    __m256d b[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) b[t] = _mm256_broadcast_sd(K + t * ldk + d);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      __m256d q = _mm256_loadu_pd(Qt + d * hb + j * 4);
      asm("" : "+x"(q));  // one load of q for its NT uses
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) a[t][j] = _mm256_fmadd_pd(b[t], q, a[t][j]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) _mm256_storeu_pd(St + t * lds + j * 4, a[t][j]);
}

template <int NV, int NT>
__attribute__((target("avx2,fma"), always_inline)) inline void qkt_run2(int nt, const double* K, i64 ldk, const double* Qt, i64 hb, i64 d0,
                                                                       i64 d1, double* St, i64 lds) {
  if constexpr (NT > 1)
    if (nt < NT) return qkt_run2<NV, NT - 1>(nt, K, ldk, Qt, hb, d0, d1, St, lds);
  qkt_tile2<NT, NV>(K, ldk, Qt, hb, d0, d1, St, lds);
}

__attribute__((target("avx2,fma"))) void qkt_avx2(const double* K, i64 ldk, i64 n, const double* Qt, i64 hb, i64 D, double* St, i64 lds) {
  constexpr i64 KB = 48, DC = 64;
  for (i64 t0 = 0; t0 < n; t0 += KB) {
    const i64 t1 = std::min(n, t0 + KB);
    for (i64 d0 = 0; d0 < D; d0 += DC) {
      const i64 d1 = std::min(D, d0 + DC);
      for (i64 h = 0; h < hb;) {  // hb % 8 == 0: vectors of 4 heads in pairs
        const int nv = hb - h >= 16 ? 4 : 2;
        for (i64 t = t0; t < t1;) {
          const int nt = static_cast<int>(std::min<i64>(nv == 4 ? 3 : 4, t1 - t));
          if (nv == 4) qkt_run2<4, 3>(nt, K + t * ldk, ldk, Qt + h, hb, d0, d1, St + t * lds + h, lds);
          else qkt_run2<2, 4>(nt, K + t * ldk, ldk, Qt + h, hb, d0, d1, St + t * lds + h, lds);
          t += nt;
        }
        h += nv * 4;
      }
    }
  }
}

// PV tile: NH heads x 4 columns, O and M, keys [t0, t1).
template <int NH>
__attribute__((target("avx2,fma"), always_inline)) inline void pvt_tile2(const double* Pt, i64 ldp, const double* V, i64 ldv, i64 t0, i64 t1,
                                                                        double* O, double* M, i64 ldo, bool first) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a[NH], b[NH];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    a[h] = first ? _mm256_setzero_pd() : _mm256_loadu_pd(O + h * ldo);
    b[h] = first ? _mm256_setzero_pd() : _mm256_loadu_pd(M + h * ldo);
  }
  for (i64 t = t0; t < t1; ++t) {
    const __m256d v = _mm256_loadu_pd(V + t * ldv), w = _mm256_andnot_pd(sign, v);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256d p = _mm256_broadcast_sd(Pt + t * ldp + h);
      a[h] = _mm256_fmadd_pd(p, v, a[h]);
      b[h] = _mm256_fmadd_pd(p, w, b[h]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) _mm256_storeu_pd(O + h * ldo, a[h]), _mm256_storeu_pd(M + h * ldo, b[h]);
}

__attribute__((target("avx2,fma"))) void pvt_avx2(const double* Pt, i64 ldp, i64 hb, i64 n, const double* V, i64 ldv, i64 dv, double* O,
                                                  double* M, i64 ldo, bool acc) {
  constexpr i64 TB = 32;
  for (i64 t0 = 0; t0 < n; t0 += TB) {
    const i64 t1 = std::min(n, t0 + TB);
    for (i64 c = 0; c < dv; c += 4)  // dv % 8 == 0
      for (i64 h = 0; h < hb;) {  // hb % 8 == 0: groups of 6 heads (12 accumulators), then 4 or 2
        const bool first = t0 == 0 && !acc;
        const i64 left = hb - h;
        if (left >= 6) pvt_tile2<6>(Pt + h, ldp, V + c, ldv, t0, t1, O + h * ldo + c, M + h * ldo + c, ldo, first), h += 6;
        else if (left == 4) pvt_tile2<4>(Pt + h, ldp, V + c, ldv, t0, t1, O + h * ldo + c, M + h * ldo + c, ldo, first), h += 4;
        else pvt_tile2<2>(Pt + h, ldp, V + c, ldv, t0, t1, O + h * ldo + c, M + h * ldo + c, ldo, first), h += 2;
      }
  }
}

__attribute__((target("avx2,fma"))) void scan_avx2(double* St, i64 lds, i64 n, i64 hb, double sm, double* m, double* zmax,
                                                   unsigned char* nan) {
  const __m256d vs = _mm256_set1_pd(sm), sign = _mm256_set1_pd(-0.0);
  for (i64 j = 0; j < hb; j += 4) {
    __m256d mv = _mm256_set1_pd(-num::detail::inf64()), zv = _mm256_setzero_pd(), nv = _mm256_setzero_pd();
    for (i64 t = 0; t < n; ++t) {
      double* s = St + t * lds + j;
      const __m256d z = _mm256_mul_pd(vs, _mm256_loadu_pd(s)), az = _mm256_andnot_pd(sign, z);
      _mm256_storeu_pd(s, z);
      nv = _mm256_or_pd(nv, _mm256_cmp_pd(z, z, _CMP_UNORD_Q));
      mv = _mm256_blendv_pd(mv, z, _mm256_cmp_pd(z, mv, _CMP_GT_OQ));
      zv = _mm256_blendv_pd(zv, az, _mm256_cmp_pd(zv, az, _CMP_LT_OQ));
    }
    _mm256_storeu_pd(m + j, mv), _mm256_storeu_pd(zmax + j, zv);
    const int bits = _mm256_movemask_pd(nv);
    for (int x = 0; x < 4; ++x) nan[j + x] = (bits >> x) & 1;
  }
}

__attribute__((target("avx2,fma"))) void exp_avx2(double* St, i64 lds, i64 n, i64 hb, const double* m, const unsigned char* keep, double* L) {
  for (i64 j = 0; j < hb; j += 4) {
    const __m256d mv = _mm256_loadu_pd(m + j);
    const __m256d kv = _mm256_castsi256_pd(_mm256_set_epi64x(keep[j + 3] ? -1 : 0, keep[j + 2] ? -1 : 0, keep[j + 1] ? -1 : 0, keep[j] ? -1 : 0));
    __m256d l = _mm256_setzero_pd();
    for (i64 t = 0; t < n; ++t) {
      double* s = St + t * lds + j;
      const __m256d p = _mm256_and_pd(kv, exp4(_mm256_sub_pd(_mm256_loadu_pd(s), mv)));
      _mm256_storeu_pd(s, p);
      l = _mm256_add_pd(l, p);
    }
    _mm256_storeu_pd(L + j, l);
  }
}

// |k_t|^2 of 4 keys at a time (a gather per dim), t0 returned for the scalar tail.
__attribute__((target("avx2,fma"))) i64 norms_avx2(const double* K, i64 ldk, i64 n, i64 D, double* s2) {
  const __m256i idx = _mm256_set_epi64x(3 * ldk, 2 * ldk, ldk, 0);
  i64 t = 0;
  for (; t + 8 <= n; t += 8) {
    __m256d a = _mm256_setzero_pd(), b = _mm256_setzero_pd();
    for (i64 d = 0; d < D; ++d) {
      const __m256d x = _mm256_i64gather_pd(K + t * ldk + d, idx, 8), y = _mm256_i64gather_pd(K + (t + 4) * ldk + d, idx, 8);
      a = _mm256_add_pd(a, _mm256_mul_pd(x, x));
      b = _mm256_add_pd(b, _mm256_mul_pd(y, y));
    }
    _mm256_storeu_pd(s2 + t, a), _mm256_storeu_pd(s2 + t + 4, b);
  }
  return t;
}

// ---- AVX-512F: 8 heads a vector ----
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"), always_inline)) inline __m512d exp8(__m512d x) {
  const __m512d sh = _mm512_set1_pd(0x1.8p52), bias = _mm512_set1_pd(1023.0);
  const __m512d k = _mm512_sub_pd(_mm512_add_pd(_mm512_mul_pd(x, _mm512_set1_pd(0x1.71547652b82fep0)), sh), sh);
  const __m512d r = _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(k, _mm512_set1_pd(0x1.62e42fefa3800p-1))),
                                  _mm512_mul_pd(k, _mm512_set1_pd(0x1.ef35793c7673p-45)));
  __m512d p = _mm512_set1_pd(kExpC[0]);
  for (int i = 1; i < 14; ++i) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(kExpC[i]));
  const __m512d k1 = _mm512_roundscale_pd(_mm512_mul_pd(k, _mm512_set1_pd(0.5)), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), k2 = _mm512_sub_pd(k, k1);
  const __m512d e1 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(_mm512_add_pd(_mm512_add_pd(k1, bias), sh)), 52));
  const __m512d e2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(_mm512_add_pd(_mm512_add_pd(k2, bias), sh)), 52));
  __m512d y = _mm512_mul_pd(_mm512_mul_pd(p, e1), e2);
  y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, _mm512_set1_pd(709.8), _CMP_GT_OQ), _mm512_set1_pd(num::detail::inf64()));
  y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, _mm512_set1_pd(-746.0), _CMP_LT_OQ), _mm512_setzero_pd());
  return _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), x);
}

template <int NT, int NV>
__attribute__((target("avx512f"), always_inline)) inline void qkt_tile5(const double* K, i64 ldk, const double* Qt, i64 hb, i64 d0, i64 d1,
                                                                        double* St, i64 lds) {
  __m512d a[NT][NV];
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) a[t][j] = d0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(St + t * lds + j * 8);
  for (i64 d = d0; d < d1; ++d) {
    __m512d b[NT];
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) b[t] = _mm512_set1_pd(K[t * ldk + d]);
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) {
      __m512d q = _mm512_loadu_pd(Qt + d * hb + j * 8);
      asm("" : "+v"(q));  // one load of q for its NT uses (GCC would fold a load into every fma)
#pragma GCC unroll 8
      for (int t = 0; t < NT; ++t) a[t][j] = _mm512_fmadd_pd(b[t], q, a[t][j]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < NT; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < NV; ++j) _mm512_storeu_pd(St + t * lds + j * 8, a[t][j]);
}

template <int NV, int NT>
__attribute__((target("avx512f"), always_inline)) inline void qkt_run5(int nt, const double* K, i64 ldk, const double* Qt, i64 hb, i64 d0,
                                                                       i64 d1, double* St, i64 lds) {
  if constexpr (NT > 1)
    if (nt < NT) return qkt_run5<NV, NT - 1>(nt, K, ldk, Qt, hb, d0, d1, St, lds);
  qkt_tile5<NT, NV>(K, ldk, Qt, hb, d0, d1, St, lds);
}

__attribute__((target("avx512f"))) void qkt_avx512(const double* K, i64 ldk, i64 n, const double* Qt, i64 hb, i64 D, double* St, i64 lds) {
  constexpr i64 KB = 48, DC = 64;
  for (i64 t0 = 0; t0 < n; t0 += KB) {
    const i64 t1 = std::min(n, t0 + KB);
    for (i64 d0 = 0; d0 < D; d0 += DC) {
      const i64 d1 = std::min(D, d0 + DC);
      for (i64 h = 0; h < hb;) {  // hb % 8 == 0: vectors of 8 heads, 8 / 4 / 2 / 1 a tile
        const i64 left = (hb - h) / 8;
        const int nv = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        for (i64 t = t0; t < t1;) {
          const int nt = static_cast<int>(std::min<i64>(nv == 8 ? 3 : nv == 4 ? 5 : 8, t1 - t));
          const double* k = K + t * ldk;
          double* s = St + t * lds + h;
          if (nv == 8) qkt_run5<8, 3>(nt, k, ldk, Qt + h, hb, d0, d1, s, lds);
          else if (nv == 4) qkt_run5<4, 5>(nt, k, ldk, Qt + h, hb, d0, d1, s, lds);
          else if (nv == 2) qkt_run5<2, 8>(nt, k, ldk, Qt + h, hb, d0, d1, s, lds);
          else qkt_run5<1, 8>(nt, k, ldk, Qt + h, hb, d0, d1, s, lds);
          t += nt;
        }
        h += nv * 8;
      }
    }
  }
}

// PV tile: NH heads x NC 8-column vectors, O and M, keys [t0, t1); V's column slice and W = |V|'s (the chunk's,
// W[(t - t0) * 16 + x]: the absolute values taken once per chunk and column slice, not once per head group).
template <int NH, int NC>
__attribute__((target("avx512f"), always_inline)) inline void pvt_tile5(const double* Pt, i64 ldp, const double* V, i64 ldv, const double* W,
                                                                        i64 t0, i64 t1, double* O, double* M, i64 ldo, bool first) {
  __m512d a[NH][NC], b[NH][NC];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      a[h][j] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(O + h * ldo + j * 8);
      b[h][j] = first ? _mm512_setzero_pd() : _mm512_loadu_pd(M + h * ldo + j * 8);
    }
  for (i64 t = t0; t < t1; ++t) {
    __m512d v[NC], w[NC];
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) {
      v[j] = _mm512_loadu_pd(V + t * ldv + j * 8);
      w[j] = _mm512_load_pd(W + (t - t0) * 16 + j * 8);
    }
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512d p = _mm512_set1_pd(Pt[t * ldp + h]);
#pragma GCC unroll 4
      for (int j = 0; j < NC; ++j) {
        a[h][j] = _mm512_fmadd_pd(p, v[j], a[h][j]);
        b[h][j] = _mm512_fmadd_pd(p, w[j], b[h][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NC; ++j) _mm512_storeu_pd(O + h * ldo + j * 8, a[h][j]), _mm512_storeu_pd(M + h * ldo + j * 8, b[h][j]);
}

template <int NC>
__attribute__((target("avx512f"), always_inline)) inline void pvt_heads5(const double* Pt, i64 ldp, i64 hb, const double* V, i64 ldv,
                                                                         const double* W, i64 t0, i64 t1, double* O, double* M, i64 ldo,
                                                                         bool first) {
  i64 h = 0;  // hb % 8 == 0: groups of 6 heads (24 or 12 accumulators), then 4 or 2
  for (; h + 6 <= hb; h += 6) pvt_tile5<6, NC>(Pt + h, ldp, V, ldv, W, t0, t1, O + h * ldo, M + h * ldo, ldo, first);
  if (hb - h == 4) pvt_tile5<4, NC>(Pt + h, ldp, V, ldv, W, t0, t1, O + h * ldo, M + h * ldo, ldo, first);
  else if (hb - h == 2) pvt_tile5<2, NC>(Pt + h, ldp, V, ldv, W, t0, t1, O + h * ldo, M + h * ldo, ldo, first);
}

__attribute__((target("avx512f"))) void pvt_avx512(const double* Pt, i64 ldp, i64 hb, i64 n, const double* V, i64 ldv, i64 dv, double* O,
                                                   double* M, i64 ldo, bool acc) {
  constexpr i64 TB = 64;  // keys a chunk: few pages of V in flight (each key row is its own page)
  alignas(64) double W[TB * 16];
  const __m512i mask = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
  for (i64 t0 = 0; t0 < n; t0 += TB) {
    const i64 t1 = std::min(n, t0 + TB);
    const bool first = t0 == 0 && !acc;
    for (i64 c = 0; c < dv; c += 8) {  // dv % 8 == 0: pairs of column vectors, then one
      const bool two = c + 16 <= dv;
      for (i64 t = t0; t < t1; ++t)
        for (int j = 0; j < (two ? 2 : 1); ++j)
          _mm512_store_pd(W + (t - t0) * 16 + j * 8,
                          _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(_mm512_loadu_pd(V + t * ldv + c + j * 8)), mask)));
      if (two) pvt_heads5<2>(Pt, ldp, hb, V + c, ldv, W, t0, t1, O + c, M + c, ldo, first);
      else pvt_heads5<1>(Pt, ldp, hb, V + c, ldv, W, t0, t1, O + c, M + c, ldo, first);
      if (two) c += 8;
    }
  }
}

__attribute__((target("avx512f"))) void scan_avx512(double* St, i64 lds, i64 n, i64 hb, double sm, double* m, double* zmax,
                                                    unsigned char* nan) {
  const __m512d vs = _mm512_set1_pd(sm);
  const __m512i absm = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
  for (i64 j = 0; j < hb; j += 8) {
    __m512d mv = _mm512_set1_pd(-num::detail::inf64()), zv = _mm512_setzero_pd();
    __mmask8 nk = 0;
    for (i64 t = 0; t < n; ++t) {
      double* s = St + t * lds + j;
      const __m512d z = _mm512_mul_pd(vs, _mm512_loadu_pd(s));
      const __m512d az = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(z), absm));
      _mm512_storeu_pd(s, z);
      nk = static_cast<__mmask8>(nk | _mm512_cmp_pd_mask(z, z, _CMP_UNORD_Q));
      mv = _mm512_mask_mov_pd(mv, _mm512_cmp_pd_mask(z, mv, _CMP_GT_OQ), z);
      zv = _mm512_mask_mov_pd(zv, _mm512_cmp_pd_mask(zv, az, _CMP_LT_OQ), az);
    }
    _mm512_storeu_pd(m + j, mv), _mm512_storeu_pd(zmax + j, zv);
    for (int x = 0; x < 8; ++x) nan[j + x] = (nk >> x) & 1;
  }
}

__attribute__((target("avx512f"))) void exp_avx512(double* St, i64 lds, i64 n, i64 hb, const double* m, const unsigned char* keep, double* L) {
  for (i64 j = 0; j < hb; j += 8) {
    const __m512d mv = _mm512_loadu_pd(m + j);
    __mmask8 kk = 0;
    for (int x = 0; x < 8; ++x) kk = static_cast<__mmask8>(kk | (keep[j + x] ? 1 << x : 0));
    __m512d l = _mm512_setzero_pd();
    for (i64 t = 0; t < n; ++t) {
      double* s = St + t * lds + j;
      const __m512d p = _mm512_maskz_mov_pd(kk, exp8(_mm512_sub_pd(_mm512_loadu_pd(s), mv)));
      _mm512_storeu_pd(s, p);
      l = _mm512_add_pd(l, p);
    }
    _mm512_storeu_pd(L + j, l);
  }
}

__attribute__((target("avx512f"))) i64 norms_avx512(const double* K, i64 ldk, i64 n, i64 D, double* s2) {
  const __m512i idx = _mm512_set_epi64(7 * ldk, 6 * ldk, 5 * ldk, 4 * ldk, 3 * ldk, 2 * ldk, ldk, 0);
  i64 t = 0;
  for (; t + 16 <= n; t += 16) {
    __m512d a = _mm512_setzero_pd(), b = _mm512_setzero_pd();
    for (i64 d = 0; d < D; ++d) {
      const __m512d x = _mm512_i64gather_pd(idx, K + t * ldk + d, 8), y = _mm512_i64gather_pd(idx, K + (t + 8) * ldk + d, 8);
      a = _mm512_add_pd(a, _mm512_mul_pd(x, x));
      b = _mm512_add_pd(b, _mm512_mul_pd(y, y));
    }
    _mm512_storeu_pd(s2 + t, a), _mm512_storeu_pd(s2 + t + 8, b);
  }
  return t;
}
#pragma GCC diagnostic pop
#endif

GemmIsa usable(GemmIsa isa) { return gemm_isa_supported(isa) ? isa : GemmIsa::generic; }

}  // namespace

void row_qk(const double* K, i64 ldk, i64 n, const double* Qt, i64 hb, i64 D, double* St, i64 lds, GemmIsa isa) {
  isa = D == 0 ? GemmIsa::generic : usable(isa);
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return qkt_avx512(K, ldk, n, Qt, hb, D, St, lds);
  if (isa == GemmIsa::avx2) return qkt_avx2(K, ldk, n, Qt, hb, D, St, lds);
#endif
  qkt_generic(K, ldk, n, Qt, hb, D, St, lds);
}

void row_pv(const double* Pt, i64 ldp, i64 hb, i64 n, const double* V, i64 ldv, i64 dv, double* O, double* M, i64 ldo, GemmIsa isa,
            bool accumulate) {
  isa = n == 0 ? GemmIsa::generic : usable(isa);
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return pvt_avx512(Pt, ldp, hb, n, V, ldv, dv, O, M, ldo, accumulate);
  if (isa == GemmIsa::avx2) return pvt_avx2(Pt, ldp, hb, n, V, ldv, dv, O, M, ldo, accumulate);
#endif
  pvt_generic(Pt, ldp, hb, n, V, ldv, dv, O, M, ldo, accumulate);
}

void row_scan(double* St, i64 lds, i64 n, i64 hb, double sm, double* m, double* zmax, unsigned char* nan, GemmIsa isa) {
  isa = usable(isa);
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return scan_avx512(St, lds, n, hb, sm, m, zmax, nan);
  if (isa == GemmIsa::avx2) return scan_avx2(St, lds, n, hb, sm, m, zmax, nan);
#endif
  scan_generic(St, lds, n, hb, sm, m, zmax, nan);
}

void row_exp(double* St, i64 lds, i64 n, i64 hb, const double* m, const unsigned char* keep, double* L, GemmIsa isa) {
  isa = usable(isa);
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return exp_avx512(St, lds, n, hb, m, keep, L);
  if (isa == GemmIsa::avx2) return exp_avx2(St, lds, n, hb, m, keep, L);
#endif
  exp_generic(St, lds, n, hb, m, keep, L);
}

void row_key_norms(const double* K, i64 ldk, i64 n, i64 D, double* s2, GemmIsa isa) {
  isa = usable(isa);
  i64 t0 = 0;
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) t0 = norms_avx512(K, ldk, n, D, s2);
  else if (isa == GemmIsa::avx2) t0 = norms_avx2(K, ldk, n, D, s2);
#endif
  norms_generic(K, ldk, t0, n, D, s2);
}

}  // namespace dsa::attn
