// ISA paths of the exact logits core (see logits_simd.hpp).
#include "engines/logits/logits_simd.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "numerics/formats.hpp"
#include "engines/logits/logits_core.hpp"

namespace dsa::engines::logits {

using i64 = std::int64_t;
using sz = std::size_t;

const double* e4m3_f64_table() {
  static const std::vector<double> t = [] {
    const float* e4 = num::e4m3_table();
    std::vector<double> v(256);
    for (int i = 0; i < 256; ++i) v[static_cast<sz>(i)] = static_cast<double>(e4[i]);
    return v;
  }();
  return t.data();
}

namespace {

// ------------------------------------------------------------------------------------------------------------
// Exact q.k tiles: C[j][c] = sum_d K[j][d] * Q[c][d]. K: nkp x D row-major (nkp a multiple of 6, zero padded),
// Qp: Q packed in tiles of 32 columns, Qp[(ct * D + d) * 32 + x] = Q[ct*32 + x][d] (ncp a multiple of 32),
// C: nkp x ncp row-major. All values are exact (see (1)), so the ISA paths give identical bits.


void gemm_generic(const double* K, int nkp, const double* Qp, int ncp, int D, double* C) {
  for (int ct = 0; ct < ncp / kCT; ++ct) {
    const double* Qt = Qp + static_cast<sz>(ct) * static_cast<sz>(D) * kCT;
    for (int j = 0; j < nkp; ++j) {
      double acc[kCT] = {};
      const double* kr = K + static_cast<sz>(j) * static_cast<sz>(D);
      for (int d = 0; d < D; ++d) {
        const double kv = kr[d];
        const double* q = Qt + static_cast<sz>(d) * kCT;
        for (int x = 0; x < kCT; ++x) acc[x] += kv * q[x];
      }
      std::memcpy(C + static_cast<sz>(j) * static_cast<sz>(ncp) + static_cast<sz>(ct) * kCT, acc, sizeof acc);
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx512f,fma"))) void gemm_avx512(const double* K, int nkp, const double* Qp, int ncp, int D,
                                                        double* C) {
  for (int ct = 0; ct < ncp / kCT; ++ct) {
    const double* Qt = Qp + static_cast<sz>(ct) * static_cast<sz>(D) * kCT;
    for (int j0 = 0; j0 < nkp; j0 += kKT) {
      __m512d acc[kKT][4];
#pragma GCC unroll 6
      for (int r = 0; r < kKT; ++r)
#pragma GCC unroll 4
        for (int x = 0; x < 4; ++x) acc[r][x] = _mm512_setzero_pd();
      const double* k0 = K + static_cast<sz>(j0) * static_cast<sz>(D);
      for (int d = 0; d < D; ++d) {
        const double* q = Qt + static_cast<sz>(d) * kCT;
        const __m512d q0 = _mm512_loadu_pd(q), q1 = _mm512_loadu_pd(q + 8), q2 = _mm512_loadu_pd(q + 16),
                      q3 = _mm512_loadu_pd(q + 24);
#pragma GCC unroll 6
        for (int r = 0; r < kKT; ++r) {
          const __m512d kb = _mm512_set1_pd(k0[static_cast<sz>(r) * static_cast<sz>(D) + static_cast<sz>(d)]);
          acc[r][0] = _mm512_fmadd_pd(kb, q0, acc[r][0]);
          acc[r][1] = _mm512_fmadd_pd(kb, q1, acc[r][1]);
          acc[r][2] = _mm512_fmadd_pd(kb, q2, acc[r][2]);
          acc[r][3] = _mm512_fmadd_pd(kb, q3, acc[r][3]);
        }
      }
#pragma GCC unroll 6
      for (int r = 0; r < kKT; ++r) {
        double* out = C + static_cast<sz>(j0 + r) * static_cast<sz>(ncp) + static_cast<sz>(ct) * kCT;
#pragma GCC unroll 4
        for (int x = 0; x < 4; ++x) _mm512_storeu_pd(out + 8 * x, acc[r][x]);
      }
    }
  }
}

__attribute__((target("avx2,fma"))) void gemm_avx2(const double* K, int nkp, const double* Qp, int ncp, int D,
                                                   double* C) {
  for (int ct = 0; ct < ncp / kCT; ++ct) {
    const double* Qt = Qp + static_cast<sz>(ct) * static_cast<sz>(D) * kCT;
    for (int x0 = 0; x0 < kCT; x0 += 8) {
      for (int j0 = 0; j0 < nkp; j0 += kKT) {
        __m256d acc[kKT][2];
#pragma GCC unroll 6
        for (int r = 0; r < kKT; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_pd();
        const double* k0 = K + static_cast<sz>(j0) * static_cast<sz>(D);
        for (int d = 0; d < D; ++d) {
          const double* q = Qt + static_cast<sz>(d) * kCT + x0;
          const __m256d q0 = _mm256_loadu_pd(q), q1 = _mm256_loadu_pd(q + 4);
#pragma GCC unroll 6
          for (int r = 0; r < kKT; ++r) {
            const __m256d kb = _mm256_broadcast_sd(k0 + static_cast<sz>(r) * static_cast<sz>(D) + static_cast<sz>(d));
            acc[r][0] = _mm256_fmadd_pd(kb, q0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_pd(kb, q1, acc[r][1]);
          }
        }
#pragma GCC unroll 6
        for (int r = 0; r < kKT; ++r) {
          double* out = C + static_cast<sz>(j0 + r) * static_cast<sz>(ncp) + static_cast<sz>(ct) * kCT + x0;
          _mm256_storeu_pd(out, acc[r][0]);
          _mm256_storeu_pd(out + 4, acc[r][1]);
        }
      }
    }
  }
}
#endif

void decode_generic(const std::uint8_t* src, int n, double* dst) {
  const double* t = e4m3_f64_table();
  for (int i = 0; i < n; ++i) dst[i] = t[src[i]];
}

// Pre-scale head sums of nj logits (key j at C + j * ldc, H contiguous head scores): per logit the 8-lane sums
// a[l] = sum_{h = l mod 8} relu(s_h) * wd_h (in increasing h; tail h >= H/8*8 into lane 0) and likewise m with wa,
// then ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)). Every path performs the same IEEE operations in the same order.
using core::tree8;
void heads_generic(const double* C, sz ldc, int nj, const double* wd, const double* wa, int H, double* acc,
                   double* mag) {
  const int H8 = H / 8 * 8;
  for (int j = 0; j < nj; ++j) {
    const double* s = C + static_cast<sz>(j) * ldc;
    double a[8] = {}, m[8] = {};
    core::head_lanes([s](int h) { return s[h]; }, [wd](int h) { return wd[h]; }, [wa](int h) { return wa[h]; }, 0, H8, a, m);
    for (int h = H8; h < H; ++h) {  // not reached: parse demands H % 8 == 0
      const double r = core::relu(s[h]);
      a[0] = hd::fma(r, wd[h], a[0]);
      m[0] = hd::fma(r, wa[h], m[0]);
    }
    acc[j] = tree8(a);
    mag[j] = tree8(m);
  }
}

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source: a -Wmaybe-uninitialized false
// positive at -O3 (all lanes are written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// vmaxpd(0, s) returns its second operand s when s is NaN or a zero of either sign: exactly `s < 0 ? 0 : s`.
__attribute__((target("avx512f,fma"))) void heads_avx512(const double* C, sz ldc, int nj, const double* wd,
                                                     const double* wa, int H, double* acc, double* mag) {
  if (H % 8 != 0) return heads_generic(C, ldc, nj, wd, wa, H, acc, mag);
  const __m512d zero = _mm512_setzero_pd();
  alignas(64) double a[8], m[8];
  for (int j = 0; j < nj; ++j) {
    const double* s = C + static_cast<sz>(j) * ldc;
    __m512d va = zero, vm = zero;
    for (int h = 0; h < H; h += 8) {
      const __m512d r = _mm512_max_pd(zero, _mm512_loadu_pd(s + h));
      va = _mm512_fmadd_pd(r, _mm512_loadu_pd(wd + h), va);
      vm = _mm512_fmadd_pd(r, _mm512_loadu_pd(wa + h), vm);
    }
    _mm512_store_pd(a, va);
    _mm512_store_pd(m, vm);
    acc[j] = tree8(a);
    mag[j] = tree8(m);
  }
}

__attribute__((target("avx2,fma"))) void heads_avx2(const double* C, sz ldc, int nj, const double* wd, const double* wa,
                                                int H, double* acc, double* mag) {
  if (H % 8 != 0) return heads_generic(C, ldc, nj, wd, wa, H, acc, mag);
  const __m256d zero = _mm256_setzero_pd();
  alignas(32) double a[8], m[8];
  for (int j = 0; j < nj; ++j) {
    const double* s = C + static_cast<sz>(j) * ldc;
    __m256d a0 = zero, a1 = zero, m0 = zero, m1 = zero;
    for (int h = 0; h < H; h += 8) {
      const __m256d r0 = _mm256_max_pd(zero, _mm256_loadu_pd(s + h));
      const __m256d r1 = _mm256_max_pd(zero, _mm256_loadu_pd(s + h + 4));
      a0 = _mm256_fmadd_pd(r0, _mm256_loadu_pd(wd + h), a0);
      a1 = _mm256_fmadd_pd(r1, _mm256_loadu_pd(wd + h + 4), a1);
      m0 = _mm256_fmadd_pd(r0, _mm256_loadu_pd(wa + h), m0);
      m1 = _mm256_fmadd_pd(r1, _mm256_loadu_pd(wa + h + 4), m1);
    }
    _mm256_store_pd(a, a0);
    _mm256_store_pd(a + 4, a1);
    _mm256_store_pd(m, m0);
    _mm256_store_pd(m + 4, m1);
    acc[j] = tree8(a);
    mag[j] = tree8(m);
  }
}

// e4m3fn -> f16 bits ((c & 0x7F) << 7 | sign << 15) is the value times 2^-8 (normals and subnormals alike);
// f16 -> f32 and the scaling by 2^8 are exact. NaN codes (0x7F, 0xFF) take the table's NaN.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void decode_avx512(const std::uint8_t* src, int n,
                                                                         double* dst) {
  const double* t = e4m3_f64_table();
  const __m512 nan_p = _mm512_set1_ps(num::e4m3_table()[0x7F]), nan_n = _mm512_set1_ps(num::e4m3_table()[0xFF]);
  const __m512 scale = _mm512_set1_ps(256.0f);
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m256i w = _mm256_cvtepu8_epi16(b);
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7F)), 7),
                                      _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8));
    __m512 f = _mm512_mul_ps(_mm512_cvtph_ps(h), scale);
    const __mmask16 np = _mm_cmpeq_epi8_mask(b, _mm_set1_epi8(0x7F));
    const __mmask16 nn = _mm_cmpeq_epi8_mask(b, _mm_set1_epi8(static_cast<char>(0xFF)));
    f = _mm512_mask_mov_ps(f, np, nan_p);
    f = _mm512_mask_mov_ps(f, nn, nan_n);
    _mm512_storeu_pd(dst + i, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
    _mm512_storeu_pd(dst + i + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
  }
  for (; i < n; ++i) dst[i] = t[src[i]];
}
#pragma GCC diagnostic pop
#endif

}  // namespace

// Runtime dispatch; DSA_LOGITS_ISA=generic|avx2|avx512|amx caps the path (tests compare the paths).
Isa pick_isa() {
  const char* env = std::getenv("DSA_LOGITS_ISA");
  const std::string want = env ? env : "";
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if ((want.empty() || want == "amx") && avx512 && amx_available()) return {gemm_avx512, heads_avx512, decode_avx512, true};
  if ((want.empty() || want == "amx" || want == "avx512") && avx512) return {gemm_avx512, heads_avx512, decode_avx512};
  if ((want.empty() || want == "amx" || want == "avx512" || want == "avx2") && avx2) return {gemm_avx2, heads_avx2, decode_generic};
#endif
  return {gemm_generic, heads_generic, decode_generic};
}

}  // namespace dsa::engines::logits
