// The GEMM micro-kernel gemm_qk of attn.v4_out and the V4 compressor's projections (sparse_attn.hpp): generic,
// AVX2 + FMA and AVX-512F paths that keep every output element's fma chain (d increasing, from +0) and so give
// identical bits; runtime dispatch capped by DSA_ATTN_ISA=generic|avx2|avx512 (gemm_isa, shared with the row engine's
// kernels of row_kernels.cpp).
//
// Speed comes from the loads, not the arithmetic: each micro-tile holds its accumulators in registers for a chunk of
// the reduction (64 dims on AVX2, 256 on AVX-512) and the chunk's operands stay in L1 across the tiles that reuse them; between chunks the
// accumulators go through the output (exact stores and loads: each element's chain is the same as without chunks).
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
void qk_generic(const double* Q, std::int64_t ldq, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S) {
  for (std::int64_t p = 0; p < np / 8; ++p)
    for (std::int64_t h = 0; h < Hp; ++h) {
      double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      const double* q = Q + h * ldq;
      const double* k = Kp + p * D * 8;
      for (std::int64_t d = 0; d < D; ++d)
        for (int x = 0; x < 8; ++x) acc[x] = std::fma(q[d], k[d * 8 + x], acc[x]);
      for (int x = 0; x < 8; ++x) S[h * np + p * 8 + x] = acc[x];
    }
}

constexpr std::int64_t kDC = 64;  // QK (AVX2): dims per chunk (a panel's chunk is 4 KB)

#if defined(__x86_64__)
// ---- AVX2 + FMA ----
// QK tile: NH heads x one 8-key panel (2 ymm per head), dims [d0, d1).
template <int NH>
__attribute__((target("avx2,fma"), always_inline)) inline void qk_tile_avx2(const double* q, std::int64_t ldq, const double* k, std::int64_t d0,
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
      const __m256d b = _mm256_broadcast_sd(q + h * ldq + d);
      a[h][0] = _mm256_fmadd_pd(b, k0, a[h][0]);
      a[h][1] = _mm256_fmadd_pd(b, k1, a[h][1]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < NH; ++h) _mm256_storeu_pd(s + h * np, a[h][0]), _mm256_storeu_pd(s + h * np + 4, a[h][1]);
}

__attribute__((target("avx2,fma"))) void qk_avx2(const double* Q, std::int64_t ldq, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D,
                                                double* S) {
  const std::int64_t panels = np / 8, G = 4;  // a group of 4 panel chunks (16 KB) stays in L1 for every head block
  for (std::int64_t d0 = 0; d0 < D; d0 += kDC) {
    const std::int64_t d1 = std::min(D, d0 + kDC);
    for (std::int64_t g = 0; g < panels; g += G)
      for (std::int64_t h = 0; h < Hp;) {
        const int nh = Hp - h >= 6 ? 6 : Hp - h >= 4 ? 4 : 2;  // Hp is even (a multiple of 4)
        for (std::int64_t p = g; p < std::min(panels, g + G); ++p) {
          const double* k = Kp + p * D * 8;
          double* s = S + h * np + p * 8;
          if (nh == 6) qk_tile_avx2<6>(Q + h * ldq, ldq, k, d0, d1, s, np);
          else if (nh == 4) qk_tile_avx2<4>(Q + h * ldq, ldq, k, d0, d1, s, np);
          else qk_tile_avx2<2>(Q + h * ldq, ldq, k, d0, d1, s, np);
        }
        h += nh;
      }
  }
}

// ---- AVX-512F ----
// (GCC 12 sees its own _mm512_undefined_* placeholders inside the intrinsics as maybe-uninitialized at -O3.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// QK tile: NH heads x NP 8-key panels (one zmm each), dims [d0, d1).
template <int NH, int NP>
__attribute__((target("avx512f"), always_inline)) inline void qk_tile_avx512(const double* q, std::int64_t ldq, std::int64_t D, const double* k,
                                                                           std::int64_t d0, std::int64_t d1, double* s, std::int64_t np) {
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
      __m512d b = _mm512_set1_pd(q[h * ldq + d]);
      asm("" : "+v"(b));  // one broadcast for its NP uses (GCC would fold a {1to8} load into every fma)
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
__attribute__((target("avx512f"), always_inline)) inline void qk_panels_avx512(const double* q, std::int64_t ldq, std::int64_t D, const double* k,
                                                                             int np_tile, std::int64_t d0, std::int64_t d1, double* s,
                                                                             std::int64_t np) {
  if (np_tile == 3) qk_tile_avx512<NH, 3>(q, ldq, D, k, d0, d1, s, np);
  else if (np_tile == 2) qk_tile_avx512<NH, 2>(q, ldq, D, k, d0, d1, s, np);
  else qk_tile_avx512<NH, 1>(q, ldq, D, k, d0, d1, s, np);
}

// Dims per chunk 256 and groups of 3 panels (a group's chunk is 18 KB, one 8-head block's 16 KB): measured on a
// 16-core Xeon (one core, Hp 64 x np 1024 x D 4096, the compressor's projection), 32.5-33.4 G FMA/s with 64 / 6,
// 34.7-36.2 with 256 / 3, 36.6-36.8 with 256 / 3 and query rows 8 doubles longer than D (no two rows of a head block
// in one L1 set: the compressor pads them, ldq).
constexpr std::int64_t kDC512 = 256;
__attribute__((target("avx512f"))) void qk_avx512(const double* Q, std::int64_t ldq, std::int64_t Hp, const double* Kp, std::int64_t np,
                                                  std::int64_t D, double* S) {
  const std::int64_t panels = np / 8, G = 3;
  for (std::int64_t d0 = 0; d0 < D; d0 += kDC512) {
    const std::int64_t d1 = std::min(D, d0 + kDC512);
    for (std::int64_t g = 0; g < panels; g += G)
      for (std::int64_t h = 0; h < Hp;) {
        const int nh = Hp - h >= 8 ? 8 : 4;  // Hp is a multiple of 4
        for (std::int64_t p = g; p < std::min(panels, g + G);) {
          const int t = static_cast<int>(std::min<std::int64_t>(3, std::min(panels, g + G) - p));
          if (nh == 8) qk_panels_avx512<8>(Q + h * ldq, ldq, D, Kp + p * D * 8, t, d0, d1, S + h * np + p * 8, np);
          else qk_panels_avx512<4>(Q + h * ldq, ldq, D, Kp + p * D * 8, t, d0, d1, S + h * np + p * 8, np);
          p += t;
        }
        h += nh;
      }
  }
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

void gemm_qk(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S, GemmIsa isa, std::int64_t ldq) {
  if (D == 0 || !supported(isa)) isa = GemmIsa::generic;
  if (ldq < D) ldq = D;
#if defined(__x86_64__)
  if (isa == GemmIsa::avx512) return qk_avx512(Q, ldq, Hp, Kp, np, D, S);
  if (isa == GemmIsa::avx2) return qk_avx2(Q, ldq, Hp, Kp, np, D, S);
#endif
  qk_generic(Q, ldq, Hp, Kp, np, D, S);
}

}  // namespace dsa::attn
