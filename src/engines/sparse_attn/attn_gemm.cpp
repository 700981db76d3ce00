// The GEMM micro-kernels of the sparse attention row engine and the V4 compressor's projections (sparse_attn.hpp):
// generic, AVX2 + FMA and AVX-512F paths that keep every output element's fma chain (d or t increasing, from +0) and
// so give identical bits; runtime dispatch capped by DSA_ATTN_ISA=generic|avx2|avx512.
//
// Speed comes from the loads, not the arithmetic: each micro-tile holds its accumulators in registers for a chunk of
// the reduction (64 dims of QK, 128-256 keys of PV) and the chunk's operands stay in L1 across the tiles that reuse
// them; between chunks the accumulators go through the output (exact stores and loads: each element's chain is the
// same as without chunks). PV computes O = P V and the bound's M = P |V| in one pass (one load of V for both).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engines/sparse_attn/sparse_attn.hpp"
#include "numerics/det_math.hpp"

namespace dsa::attn {
namespace {

// ---- generic: the reference order, scalar fma ----
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

void pv_generic(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n, std::int64_t dv, double* O,
                double* M) {
  for (std::int64_t h = 0; h < Hp; ++h)
    for (std::int64_t c = 0; c < dv; ++c) {
      double o = 0, m = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        const double v = Vp[((c / 8) * n + t) * 8 + c % 8], p = P[h * ldp + t];
        o = std::fma(p, v, o);
        m = std::fma(p, std::fabs(v), m);
      }
      O[h * dv + c] = o;
      if (M) M[h * dv + c] = m;
    }
}

constexpr std::int64_t kDC = 64;  // QK: dims per chunk (a panel's chunk is 4 KB)

#if defined(__x86_64__)
// ---- AVX2 + FMA ----
// QK tile: NH heads x one 8-key panel (2 ymm per head), dims [d0, d1).
template <int NH>
__attribute__((target("avx2,fma"), always_inline)) inline void qk_tile_avx2(const double* q, std::int64_t D, const double* k, std::int64_t d0,
                                                                           std::int64_t d1, double* s, std::int64_t np) {
  __m256d a[NH][2];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
    if (d0 == 0) a[h][0] = a[h][1] = _mm256_setzero_pd();
    else a[h][0] = _mm256_loadu_pd(s + h * np), a[h][1] = _mm256_loadu_pd(s + h * np + 4);
  for (std::int64_t d = d0; d < d1; ++d) {
    const __m256d k0 = _mm256_loadu_pd(k + d * 8), k1 = _mm256_loadu_pd(k + d * 8 + 4);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256d b = _mm256_broadcast_sd(q + h * D + d);
      a[h][0] = _mm256_fmadd_pd(b, k0, a[h][0]);
      a[h][1] = _mm256_fmadd_pd(b, k1, a[h][1]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) _mm256_storeu_pd(s + h * np, a[h][0]), _mm256_storeu_pd(s + h * np + 4, a[h][1]);
}

__attribute__((target("avx2,fma"))) void qk_avx2(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S) {
  const std::int64_t panels = np / 8, G = 4;  // a group of 4 panel chunks (16 KB) stays in L1 for every head block
  for (std::int64_t d0 = 0; d0 < D; d0 += kDC) {
    const std::int64_t d1 = std::min(D, d0 + kDC);
    for (std::int64_t g = 0; g < panels; g += G)
      for (std::int64_t h = 0; h < Hp;) {
        const int nh = Hp - h >= 6 ? 6 : Hp - h >= 4 ? 4 : 2;  // Hp is even (a multiple of 4)
        for (std::int64_t p = g; p < std::min(panels, g + G); ++p) {
          const double* k = Kp + p * D * 8;
          double* s = S + h * np + p * 8;
          if (nh == 6) qk_tile_avx2<6>(Q + h * D, D, k, d0, d1, s, np);
          else if (nh == 4) qk_tile_avx2<4>(Q + h * D, D, k, d0, d1, s, np);
          else qk_tile_avx2<2>(Q + h * D, D, k, d0, d1, s, np);
        }
        h += nh;
      }
  }
}

// PV tile: NH heads x 8 columns (2 ymm), keys [t0, t1); with M: |V| from the same loads into the magnitude chains.
template <int NH, bool WithM>
__attribute__((target("avx2,fma"), always_inline)) inline void pv_tile_avx2(const double* P, std::int64_t ldp, const double* V, std::int64_t t0,
                                                                           std::int64_t t1, double* o, double* m, std::int64_t dv) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a[NH][2], b[NH][2];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    if (t0 == 0) {
      a[h][0] = a[h][1] = _mm256_setzero_pd();
      if (WithM) b[h][0] = b[h][1] = _mm256_setzero_pd();
    } else {
      a[h][0] = _mm256_loadu_pd(o + h * dv), a[h][1] = _mm256_loadu_pd(o + h * dv + 4);
      if (WithM) b[h][0] = _mm256_loadu_pd(m + h * dv), b[h][1] = _mm256_loadu_pd(m + h * dv + 4);
    }
  }
  for (std::int64_t t = t0; t < t1; ++t) {
    const __m256d v0 = _mm256_loadu_pd(V + t * 8), v1 = _mm256_loadu_pd(V + t * 8 + 4);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m256d p = _mm256_broadcast_sd(P + h * ldp + t);
      a[h][0] = _mm256_fmadd_pd(p, v0, a[h][0]);
      a[h][1] = _mm256_fmadd_pd(p, v1, a[h][1]);
      if (WithM) {
        b[h][0] = _mm256_fmadd_pd(p, _mm256_andnot_pd(sign, v0), b[h][0]);
        b[h][1] = _mm256_fmadd_pd(p, _mm256_andnot_pd(sign, v1), b[h][1]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) {
    _mm256_storeu_pd(o + h * dv, a[h][0]), _mm256_storeu_pd(o + h * dv + 4, a[h][1]);
    if (WithM) _mm256_storeu_pd(m + h * dv, b[h][0]), _mm256_storeu_pd(m + h * dv + 4, b[h][1]);
  }
}

__attribute__((target("avx2,fma"))) void pv_avx2(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n,
                                                  std::int64_t dv, double* O, double* M) {
  // Keys in chunks of 256 (a V block 16 KB, a 2-head P block 4 KB: L1-resident).
  for (std::int64_t t0 = 0; t0 < n; t0 += 256) {
    const std::int64_t t1 = std::min(n, t0 + 256);
    for (std::int64_t c = 0; c < dv; c += 8)
      for (std::int64_t h = 0; h < Hp; h += M ? 2 : 4) {  // Hp is a multiple of 4
        const double* V = Vp + (c / 8) * n * 8;
        if (M) pv_tile_avx2<2, true>(P + h * ldp, ldp, V, t0, t1, O + h * dv + c, M + h * dv + c, dv);
        else pv_tile_avx2<4, false>(P + h * ldp, ldp, V, t0, t1, O + h * dv + c, nullptr, dv);
      }
  }
}

// ---- AVX-512F ----
// (GCC 12 sees its own _mm512_undefined_* placeholders inside the intrinsics as maybe-uninitialized at -O3.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// QK tile: NH heads x NP 8-key panels (one zmm each), dims [d0, d1).
template <int NH, int NP>
__attribute__((target("avx512f"), always_inline)) inline void qk_tile_avx512(const double* q, std::int64_t D, const double* k, std::int64_t d0,
                                                                           std::int64_t d1, double* s, std::int64_t np) {
  __m512d a[NH][NP];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) a[h][j] = d0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(s + h * np + j * 8);
  for (std::int64_t d = d0; d < d1; ++d) {
    __m512d kv[NP];
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) kv[j] = _mm512_loadu_pd(k + j * D * 8 + d * 8);
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512d b = _mm512_set1_pd(q[h * D + d]);
#pragma GCC unroll 4
      for (int j = 0; j < NP; ++j) a[h][j] = _mm512_fmadd_pd(b, kv[j], a[h][j]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int j = 0; j < NP; ++j) _mm512_storeu_pd(s + h * np + j * 8, a[h][j]);
}

template <int NH>
__attribute__((target("avx512f"), always_inline)) inline void qk_panels_avx512(const double* q, std::int64_t D, const double* k, int np_tile,
                                                                             std::int64_t d0, std::int64_t d1, double* s, std::int64_t np) {
  if (np_tile == 3) qk_tile_avx512<NH, 3>(q, D, k, d0, d1, s, np);
  else if (np_tile == 2) qk_tile_avx512<NH, 2>(q, D, k, d0, d1, s, np);
  else qk_tile_avx512<NH, 1>(q, D, k, d0, d1, s, np);
}

__attribute__((target("avx512f"))) void qk_avx512(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S) {
  const std::int64_t panels = np / 8, G = 6;  // 6 panel chunks (24 KB) stay in L1 for every head block
  for (std::int64_t d0 = 0; d0 < D; d0 += kDC) {
    const std::int64_t d1 = std::min(D, d0 + kDC);
    for (std::int64_t g = 0; g < panels; g += G)
      for (std::int64_t h = 0; h < Hp;) {
        const int nh = Hp - h >= 8 ? 8 : 4;  // Hp is a multiple of 4
        for (std::int64_t p = g; p < std::min(panels, g + G);) {
          const int t = static_cast<int>(std::min<std::int64_t>(3, std::min(panels, g + G) - p));
          if (nh == 8) qk_panels_avx512<8>(Q + h * D, D, Kp + p * D * 8, t, d0, d1, S + h * np + p * 8, np);
          else qk_panels_avx512<4>(Q + h * D, D, Kp + p * D * 8, t, d0, d1, S + h * np + p * 8, np);
          p += t;
        }
        h += nh;
      }
  }
}

// PV tile: NH heads x NC 8-column blocks (one zmm each; block j at V + j * n * 8), keys [t0, t1).
template <int NH, int NC, bool WithM>
__attribute__((target("avx512f"), always_inline)) inline void pv_tile_avx512(const double* P, std::int64_t ldp, const double* V, std::int64_t n,
                                                                           std::int64_t t0, std::int64_t t1, double* o, double* m, std::int64_t dv) {
  const __m512i mask = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
  __m512d a[NH][NC], b[NH][NC];
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) {
      a[h][j] = t0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(o + h * dv + j * 8);
      if (WithM) b[h][j] = t0 == 0 ? _mm512_setzero_pd() : _mm512_loadu_pd(m + h * dv + j * 8);
    }
  for (std::int64_t t = t0; t < t1; ++t) {
    __m512d v[NC], w[NC];
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) {
      v[j] = _mm512_loadu_pd(V + j * n * 8 + t * 8);
      w[j] = _mm512_castsi512_pd(_mm512_and_si512(_mm512_castpd_si512(v[j]), mask));
    }
#pragma GCC unroll 8
    for (int h = 0; h < NH; ++h) {
      const __m512d p = _mm512_set1_pd(P[h * ldp + t]);
#pragma GCC unroll 2
      for (int j = 0; j < NC; ++j) {
        a[h][j] = _mm512_fmadd_pd(p, v[j], a[h][j]);
        if (WithM) b[h][j] = _mm512_fmadd_pd(p, w[j], b[h][j]);
      }
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 2
    for (int j = 0; j < NC; ++j) {
      _mm512_storeu_pd(o + h * dv + j * 8, a[h][j]);
      if (WithM) _mm512_storeu_pd(m + h * dv + j * 8, b[h][j]);
    }
}

__attribute__((target("avx512f"))) void pv_avx512(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n,
                                                   std::int64_t dv, double* O, double* M) {
  // Keys in chunks of 128 (two V blocks 16 KB, a 4-head P block 4 KB: L1-resident).
  for (std::int64_t t0 = 0; t0 < n; t0 += 128) {
    const std::int64_t t1 = std::min(n, t0 + 128);
    for (std::int64_t c = 0; c < dv; c += 16)
      for (std::int64_t h = 0; h < Hp; h += 4) {
        const double* V = Vp + (c / 8) * n * 8;
        double *o = O + h * dv + c, *m = M ? M + h * dv + c : nullptr;
        const bool two = c + 16 <= dv;
        if (M && two) pv_tile_avx512<4, 2, true>(P + h * ldp, ldp, V, n, t0, t1, o, m, dv);
        else if (M) pv_tile_avx512<4, 1, true>(P + h * ldp, ldp, V, n, t0, t1, o, m, dv);
        else if (two) pv_tile_avx512<4, 2, false>(P + h * ldp, ldp, V, n, t0, t1, o, nullptr, dv);
        else pv_tile_avx512<4, 1, false>(P + h * ldp, ldp, V, n, t0, t1, o, nullptr, dv);
      }
  }
}

// ---- det_exp lane by lane (numerics/det_math.hpp's operations: the shifter's k, Cody-Waite r, Horner from 1/13!,
// 2^k as two exact powers of two; NaN, > 709.8 and < -746 by blends). k's halves: k1 = trunc(k / 2) (exact, as the
// integer division), k2 = k - k1; 2^j from the bits of j + 1023 + 1.5 * 2^52 shifted into the exponent.
constexpr double kExpC[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0,
                              1.0 / 40320.0,      1.0 / 5040.0,      1.0 / 720.0,       1.0 / 120.0,      1.0 / 24.0,
                              1.0 / 6.0,          0.5,               1.0,               1.0};

__attribute__((target("avx2,fma"))) void exp_avx2(double* s, std::int64_t n, double m) {
  const __m256d vm = _mm256_set1_pd(m), l2e = _mm256_set1_pd(0x1.71547652b82fep0), sh = _mm256_set1_pd(0x1.8p52);
  const __m256d c1 = _mm256_set1_pd(0x1.62e42fefa3800p-1), c2 = _mm256_set1_pd(0x1.ef35793c7673p-45), half = _mm256_set1_pd(0.5);
  const __m256d bias = _mm256_set1_pd(1023.0), hi = _mm256_set1_pd(709.8), lo = _mm256_set1_pd(-746.0);
  const __m256d inf = _mm256_set1_pd(num::detail::inf64()), zero = _mm256_setzero_pd();
  std::int64_t t = 0;
  for (; t + 4 <= n; t += 4) {
    const __m256d x = _mm256_sub_pd(_mm256_loadu_pd(s + t), vm);
    const __m256d k = _mm256_sub_pd(_mm256_add_pd(_mm256_mul_pd(x, l2e), sh), sh);
    const __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(k, c1)), _mm256_mul_pd(k, c2));
    __m256d p = _mm256_set1_pd(kExpC[0]);
    for (int i = 1; i < 14; ++i) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kExpC[i]));
    const __m256d k1 = _mm256_round_pd(_mm256_mul_pd(k, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), k2 = _mm256_sub_pd(k, k1);
    const __m256d e1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(_mm256_add_pd(k1, bias), sh)), 52));
    const __m256d e2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(_mm256_add_pd(_mm256_add_pd(k2, bias), sh)), 52));
    __m256d y = _mm256_mul_pd(_mm256_mul_pd(p, e1), e2);
    y = _mm256_blendv_pd(y, inf, _mm256_cmp_pd(x, hi, _CMP_GT_OQ));
    y = _mm256_blendv_pd(y, zero, _mm256_cmp_pd(x, lo, _CMP_LT_OQ));
    y = _mm256_blendv_pd(y, x, _mm256_cmp_pd(x, x, _CMP_UNORD_Q));
    _mm256_storeu_pd(s + t, y);
  }
  for (; t < n; ++t) s[t] = num::det_exp(s[t] - m);
}

__attribute__((target("avx512f"))) void exp_avx512(double* s, std::int64_t n, double m) {
  const __m512d vm = _mm512_set1_pd(m), l2e = _mm512_set1_pd(0x1.71547652b82fep0), sh = _mm512_set1_pd(0x1.8p52);
  const __m512d c1 = _mm512_set1_pd(0x1.62e42fefa3800p-1), c2 = _mm512_set1_pd(0x1.ef35793c7673p-45), half = _mm512_set1_pd(0.5);
  const __m512d bias = _mm512_set1_pd(1023.0), hi = _mm512_set1_pd(709.8), lo = _mm512_set1_pd(-746.0);
  const __m512d inf = _mm512_set1_pd(num::detail::inf64()), zero = _mm512_setzero_pd();
  std::int64_t t = 0;
  for (; t + 8 <= n; t += 8) {
    const __m512d x = _mm512_sub_pd(_mm512_loadu_pd(s + t), vm);
    const __m512d k = _mm512_sub_pd(_mm512_add_pd(_mm512_mul_pd(x, l2e), sh), sh);
    const __m512d r = _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(k, c1)), _mm512_mul_pd(k, c2));
    __m512d p = _mm512_set1_pd(kExpC[0]);
    for (int i = 1; i < 14; ++i) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(kExpC[i]));
    const __m512d k1 = _mm512_roundscale_pd(_mm512_mul_pd(k, half), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), k2 = _mm512_sub_pd(k, k1);
    const __m512d e1 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(_mm512_add_pd(_mm512_add_pd(k1, bias), sh)), 52));
    const __m512d e2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(_mm512_add_pd(_mm512_add_pd(k2, bias), sh)), 52));
    __m512d y = _mm512_mul_pd(_mm512_mul_pd(p, e1), e2);
    y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, hi, _CMP_GT_OQ), inf);
    y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, lo, _CMP_LT_OQ), zero);
    y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(x, x, _CMP_UNORD_Q), x);
    _mm512_storeu_pd(s + t, y);
  }
  for (; t < n; ++t) s[t] = num::det_exp(s[t] - m);
}
#pragma GCC diagnostic pop
#endif

// What this CPU runs, asked once (every kernel call checks the path it is given).
bool supported(GemmIsa isa) {
  static const bool avx512 = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return false;
#endif
  }();
  static const bool avx2 = [] {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
  }();
  return isa == GemmIsa::avx512 ? avx512 : isa == GemmIsa::avx2 ? avx2 : true;
}

}  // namespace

bool gemm_isa_supported(GemmIsa isa) { return supported(isa); }

GemmIsa gemm_isa() {
  static const GemmIsa best = [] {
    const char* env = std::getenv("DSA_ATTN_ISA");
    const std::string cap = env ? env : "";
    if ((cap.empty() || cap == "avx512") && supported(GemmIsa::avx512)) return GemmIsa::avx512;
    if ((cap.empty() || cap == "avx512" || cap == "avx2") && supported(GemmIsa::avx2)) return GemmIsa::avx2;
    return GemmIsa::generic;
  }();
  return best;
}

void gemm_qk(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S, GemmIsa isa) {
  if (D == 0 || !supported(isa)) isa = GemmIsa::generic;
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return qk_avx512(Q, Hp, Kp, np, D, S);
  if (isa == GemmIsa::avx2) return qk_avx2(Q, Hp, Kp, np, D, S);
#endif
  qk_generic(Q, Hp, Kp, np, D, S);
}

void gemm_pv(const double* P, std::int64_t Hp, std::int64_t ldp, const double* Vp, std::int64_t n, std::int64_t dv, double* O, double* M,
             GemmIsa isa) {
  if (n == 0 || !supported(isa)) isa = GemmIsa::generic;
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return pv_avx512(P, Hp, ldp, Vp, n, dv, O, M);
  if (isa == GemmIsa::avx2) return pv_avx2(P, Hp, ldp, Vp, n, dv, O, M);
#endif
  pv_generic(P, Hp, ldp, Vp, n, dv, O, M);
}

void exp_shifted(double* s, std::int64_t n, double m, GemmIsa isa) {
  if (!supported(isa)) isa = GemmIsa::generic;
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return exp_avx512(s, n, m);
  if (isa == GemmIsa::avx2) return exp_avx2(s, n, m);
#endif
  for (std::int64_t t = 0; t < n; ++t) s[t] = num::det_exp(s[t] - m);
}

}  // namespace dsa::attn
