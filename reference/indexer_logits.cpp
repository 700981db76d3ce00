// indexer.logits_ragged / indexer.logits_paged — DeepGEMM fp8_mqa_logits / fp8_paged_mqa_logits
// (spec v32 §3.2-§3.6), exact reference plus the bit-exact `deepgemm-sm90` emulation (sm90_fp8_wgmma.md).
//
// EXACT REFERENCE
//   logit(i, j) = kv_scale[j] * sum_h relu(s_h) * W[i, h],   s_h = sum_d q[i, h, d] * k[j, d]
// rounded ONCE (RNE) from the exact real value to fp32 (or directly to bf16 for logits_dtype=bf16).
//
// (1) s_h is computed EXACTLY in fp64, in any summation order. Proof: an e4m3fn value is sig * 2^(E-3) with
//     |sig| <= 15 (4 significant bits) and E in [-6, 8] (subnormals: sig <= 7, E = -6), i.e. an integer multiple
//     of 2^-9 with |x| <= 448 < 2^8.81. A product is an integer multiple of 2^-18 with <= 8 significant bits and
//     |p| <= 448^2 = 200704 < 2^17.62. A partial sum of at most D <= 128 = 2^7 products is therefore an integer
//     multiple of 2^-18 with magnitude < 2^7 * 2^17.62 = 2^24.62, i.e. an integer n * 2^-18 with |n| < 2^42.62 <
//     2^53. Every such value is representable in fp64, so every product, every fma and every addition performed
//     on the way (by any blocking, SIMD width or order) is exact, and the dgemm below yields the exact s_h.
//     (tests/cpp/test_ref_logits.cpp checks this against integer arithmetic on codes scaled by 2^18.)
// (2) The head reduction is evaluated in fp64 (8 fixed lanes over h, lanes added pairwise) together with
//     M = |kv_scale| * sum_h |W_h| relu(s_h) and a rigorous bound err = (H+8) 2^-52 M + 2^-50 |v| on the
//     difference between the fp64 value v and the exact value. If v - err and v + err round to the same
//     fp32 (bf16) value, that is the correctly rounded exact value (rounding is monotone). Otherwise
//     (near a rounding boundary, ~2^-20 of the logits) the exact value is built in a 512-bit integer
//     (s_h = n_h 2^-18, W_h = m_h 2^e_h, kv_scale = m_s 2^e_s), rounded to odd at 53 bits and then RNE to the
//     target (53 >= 24 + 2, so that double step is exact rounding). Hence the result is independent of the
//     summation order, SIMD path and thread count.
// (3) Non-finite inputs (fp8 NaN codes, inf/NaN weights or scales): the IEEE fp64 value in the order of (2),
//     relu keeping NaN (NaN propagates; inf*0 = NaN), rounded once.
//
// Magnitude M (RefTensor::magnitude, f64) = kv_scale * sum_h |W_h| relu(s_h) per logit.
// Memory: O(output) — rows and keys are processed in tiles with per-thread buffers.
// Speed (scripts/bench.sh): ~90 % of the time is the fp64 FMA micro-kernel; Q is packed once per row block and
// thread, K is decoded with a vector e4m3 -> f16 -> f32 -> f64 conversion, and the head sums of (2) run in 8-lane
// SIMD doing the same IEEE operations in the same order as the scalar path (all paths agree bit for bit).
//
// EMULATION `deepgemm-sm90`: s_h by num::sm90::wgmma_dot, head reduction num::sm90::head_reduce, bf16 = RNE of
// the fp32 value; columns the kernel's clean pass sets to -inf are -inf.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "numerics/formats.hpp"
#include "numerics/sm90.hpp"
#include "reference/kcache_layout.hpp"
#include "reference/v32_indexer.hpp"

namespace dsa::ref {
namespace {

using i64 = std::int64_t;
using sz = std::size_t;
__extension__ typedef unsigned __int128 u128;  // GCC/Clang extension (pedantic-clean via __extension__)

// ------------------------------------------------------------------------------------------------------------
// Exact q.k tiles: C[j][c] = sum_d K[j][d] * Q[c][d]. K: nkp x D row-major (nkp a multiple of 6, zero padded),
// Qp: Q packed in tiles of 32 columns, Qp[(ct * D + d) * 32 + x] = Q[ct*32 + x][d] (ncp a multiple of 32),
// C: nkp x ncp row-major. All values are exact (see (1)), so the ISA paths give identical bits.
constexpr int kCT = 32;
constexpr int kKT = 6;

using GemmFn = void (*)(const double*, int, const double*, int, int, double*);

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

// e4m3 code -> f64 (the exact value of num::e4m3_table() widened; NaN codes give the widened table NaN).
const double* e4m3_f64_table() {
  static const std::vector<double> t = [] {
    const float* e4 = num::e4m3_table();
    std::vector<double> v(256);
    for (int i = 0; i < 256; ++i) v[static_cast<sz>(i)] = static_cast<double>(e4[i]);
    return v;
  }();
  return t.data();
}

// Decode n e4m3 codes to f64.
using DecodeFn = void (*)(const std::uint8_t*, int, double*);
void decode_generic(const std::uint8_t* src, int n, double* dst) {
  const double* t = e4m3_f64_table();
  for (int i = 0; i < n; ++i) dst[i] = t[src[i]];
}

// Pre-scale head sums of nj logits (key j at C + j * ldc, H contiguous head scores): per logit the 8-lane sums
// a[l] = sum_{h = l mod 8} relu(s_h) * wd_h (in increasing h; tail h >= H/8*8 into lane 0) and likewise m with wa,
// then ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)). Every path performs the same IEEE operations in the same order.
using HeadFn = void (*)(const double*, sz, int, const double*, const double*, int, double*, double*);
inline double tree8(const double* x) { return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); }
void heads_generic(const double* C, sz ldc, int nj, const double* wd, const double* wa, int H, double* acc,
                   double* mag) {
  for (int j = 0; j < nj; ++j) {
    const double* s = C + static_cast<sz>(j) * ldc;
    double a[8] = {}, m[8] = {};
    int h = 0;
    for (; h + 8 <= H; h += 8)
      for (int l = 0; l < 8; ++l) {
        const double r = s[h + l] < 0.0 ? 0.0 : s[h + l];  // relu keeping NaN
        a[l] += r * wd[h + l];
        m[l] += r * wa[h + l];
      }
    for (; h < H; ++h) {
      const double r = s[h] < 0.0 ? 0.0 : s[h];
      a[0] += r * wd[h];
      m[0] += r * wa[h];
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
__attribute__((target("avx512f"))) void heads_avx512(const double* C, sz ldc, int nj, const double* wd,
                                                     const double* wa, int H, double* acc, double* mag) {
  if (H % 8 != 0) return heads_generic(C, ldc, nj, wd, wa, H, acc, mag);
  const __m512d zero = _mm512_setzero_pd();
  alignas(64) double a[8], m[8];
  for (int j = 0; j < nj; ++j) {
    const double* s = C + static_cast<sz>(j) * ldc;
    __m512d va = zero, vm = zero;
    for (int h = 0; h < H; h += 8) {
      const __m512d r = _mm512_max_pd(zero, _mm512_loadu_pd(s + h));
      va = _mm512_add_pd(va, _mm512_mul_pd(r, _mm512_loadu_pd(wd + h)));
      vm = _mm512_add_pd(vm, _mm512_mul_pd(r, _mm512_loadu_pd(wa + h)));
    }
    _mm512_store_pd(a, va);
    _mm512_store_pd(m, vm);
    acc[j] = tree8(a);
    mag[j] = tree8(m);
  }
}

__attribute__((target("avx2"))) void heads_avx2(const double* C, sz ldc, int nj, const double* wd, const double* wa,
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
      a0 = _mm256_add_pd(a0, _mm256_mul_pd(r0, _mm256_loadu_pd(wd + h)));
      a1 = _mm256_add_pd(a1, _mm256_mul_pd(r1, _mm256_loadu_pd(wd + h + 4)));
      m0 = _mm256_add_pd(m0, _mm256_mul_pd(r0, _mm256_loadu_pd(wa + h)));
      m1 = _mm256_add_pd(m1, _mm256_mul_pd(r1, _mm256_loadu_pd(wa + h + 4)));
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

struct Isa {
  GemmFn gemm;
  HeadFn heads;
  DecodeFn decode;
};

// Runtime dispatch; DSA_LOGITS_ISA=generic|avx2|avx512 caps the path (tests compare the paths).
Isa pick_isa() {
  const char* env = std::getenv("DSA_LOGITS_ISA");
  const std::string want = env ? env : "";
#if defined(__x86_64__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if ((want.empty() || want == "avx512") && avx512) return {gemm_avx512, heads_avx512, decode_avx512};
  if ((want.empty() || want == "avx512" || want == "avx2") && avx2) return {gemm_avx2, heads_avx2, decode_generic};
#endif
  return {gemm_generic, heads_generic, decode_generic};
}

// Per-thread tile buffers.
struct Tile {
  int D = 0, nkp = 0, ncp = 0;
  std::vector<double> K, Qp, C;
  void shape(int kb, int nc, int d) {
    D = d;
    nkp = (kb + kKT - 1) / kKT * kKT;
    ncp = (nc + kCT - 1) / kCT * kCT;
    K.assign(static_cast<sz>(nkp) * static_cast<sz>(D), 0.0);
    Qp.assign(static_cast<sz>(ncp) * static_cast<sz>(D), 0.0);
    C.assign(static_cast<sz>(nkp) * static_cast<sz>(ncp), 0.0);
  }
  double* k_row(int j) { return K.data() + static_cast<sz>(j) * static_cast<sz>(D); }
  // Packs n consecutive q rows of D e4m3 codes (decoded through the exact f64 table e4d) in 32-column tiles.
  void pack_q(const std::uint8_t* q, std::int64_t n, const double* e4d) {
    std::fill(Qp.begin(), Qp.end(), 0.0);
    for (std::int64_t x = 0; x < n; ++x) {
      const std::uint8_t* src = q + x * D;
      double* dst = Qp.data() + static_cast<sz>(x / kCT) * static_cast<sz>(D * kCT) + static_cast<sz>(x % kCT);
      for (int d = 0; d < D; ++d) dst[static_cast<sz>(d) * kCT] = e4d[src[d]];
    }
  }
  const double* c_at(int j, int c) const { return C.data() + static_cast<sz>(j) * static_cast<sz>(ncp) + static_cast<sz>(c); }
};

// ------------------------------------------------------------------------------------------------------------
// Exactly rounded head reduction (see (2)).
// A NaN result is written as the positive canonical quiet NaN: its sign would depend on the operation order of
// the ISA path (x86's default NaN is negative), and the reference must give the same bits on every machine.
inline std::uint32_t round_to(double v, bool bf16) {
  if (std::isnan(v)) return bf16 ? 0x7FC0u : 0x7FC00000u;
  return bf16 ? num::f64_to_bf16(v) : num::f32_bits(static_cast<float>(v));
}

// 512-bit two's complement integer.
struct Big {
  static constexpr int N = 8;
  std::uint64_t l[N] = {};
  void add_shifted(u128 m, int sh, bool neg) {
    std::uint64_t t[N] = {};
    const int li = sh / 64, bi = sh % 64;
    const std::uint64_t lo = static_cast<std::uint64_t>(m), hi = static_cast<std::uint64_t>(m >> 64);
    std::uint64_t w3[3];
    w3[0] = lo << bi;
    w3[1] = bi ? (hi << bi) | (lo >> (64 - bi)) : hi;
    w3[2] = bi ? hi >> (64 - bi) : 0;
    for (int k = 0; k < 3 && li + k < N; ++k) t[li + k] = w3[k];
    if (neg) {  // t = -t
      unsigned carry = 1;
      for (int k = 0; k < N; ++k) {
        const u128 s = static_cast<u128>(~t[k]) + carry;
        t[k] = static_cast<std::uint64_t>(s);
        carry = static_cast<unsigned>(s >> 64);
      }
    }
    unsigned carry = 0;
    for (int k = 0; k < N; ++k) {
      const u128 s = static_cast<u128>(l[k]) + t[k] + carry;
      l[k] = static_cast<std::uint64_t>(s);
      carry = static_cast<unsigned>(s >> 64);
    }
  }
  bool negative() const { return (l[N - 1] >> 63) != 0; }
  void negate() {
    unsigned carry = 1;
    for (int k = 0; k < N; ++k) {
      const u128 s = static_cast<u128>(~l[k]) + carry;
      l[k] = static_cast<std::uint64_t>(s);
      carry = static_cast<unsigned>(s >> 64);
    }
  }
  void mul(std::uint64_t m) {  // magnitude only
    u128 carry = 0;
    for (int k = 0; k < N; ++k) {
      const u128 p = static_cast<u128>(l[k]) * m + carry;
      l[k] = static_cast<std::uint64_t>(p);
      carry = p >> 64;
    }
  }
  // Magnitude rounded to odd at 53 bits, times 2^exp2.
  double to_double_odd(int exp2) const {
    int top = -1;
    for (int k = N - 1; k >= 0 && top < 0; --k)
      if (l[k]) top = k * 64 + 63 - __builtin_clzll(l[k]);
    if (top < 0) return 0.0;
    auto bit_range = [&](int from, int count) {  // bits [from, from+count), count <= 64
      std::uint64_t r = 0;
      for (int b = 0; b < count; ++b) {
        const int p = from + b;
        if (p >= 0 && ((l[p / 64] >> (p % 64)) & 1u)) r |= std::uint64_t{1} << b;
      }
      return r;
    };
    if (top < 53) return std::ldexp(static_cast<double>(bit_range(0, 53)), exp2);
    const int low = top - 52;
    std::uint64_t m = bit_range(low, 53);
    bool sticky = false;
    for (int p = 0; p < low && !sticky; ++p) sticky = ((l[p / 64] >> (p % 64)) & 1u) != 0;
    if (sticky) m |= 1u;
    return std::ldexp(static_cast<double>(m), exp2 + low);
  }
};

// Exact path: all of s, w, sc finite, sc != 0.
std::uint32_t exact_round(const double* s, const float* w, int H, float sc, bool bf16) {
  int es;
  const double fs = std::frexp(static_cast<double>(sc), &es);
  const auto ms = static_cast<std::uint64_t>(std::ldexp(std::fabs(fs), 24));
  es -= 24;
  struct Term { u128 m; int e; bool neg; };
  std::vector<Term> terms;
  terms.reserve(static_cast<sz>(H));
  int base = std::numeric_limits<int>::max();
  for (int h = 0; h < H; ++h) {
    if (!(s[h] > 0.0) || w[h] == 0.0f) continue;
    const auto n = static_cast<std::uint64_t>(std::ldexp(s[h], 18));  // exact integer < 2^43
    int ew;
    const double fw = std::frexp(static_cast<double>(w[h]), &ew);
    const auto mw = static_cast<std::uint64_t>(std::ldexp(std::fabs(fw), 24));
    terms.push_back({static_cast<u128>(n) * mw, ew - 24, w[h] < 0.0f});
    base = std::min(base, ew - 24);
  }
  if (terms.empty()) return round_to(0.0, bf16);
  Big acc;
  for (const Term& t : terms) acc.add_shifted(t.m, t.e - base, t.neg);
  bool neg = acc.negative();
  if (neg) acc.negate();
  acc.mul(ms);
  if (sc < 0.0f) neg = !neg;
  const double d = acc.to_double_odd(base - 18 + es);
  return round_to(neg ? -d : d, bf16);
}

// s[H] exact dot products, acc/mag their pre-scale head sums (HeadFn), w the fp32 weights. Returns target bits;
// M = magnitude.
inline std::uint32_t finish(double acc, double mag, const double* s, const float* w, int H, float sc, bool bf16,
                            double& M) {
  const double v = acc * static_cast<double>(sc);
  M = mag * static_cast<double>(sc);
  const double Ma = std::fabs(M);
  if (!std::isfinite(v) || !std::isfinite(Ma)) return round_to(v, bf16);  // (3)
  const double err = static_cast<double>(H + 8) * 0x1p-52 * Ma + 0x1p-50 * std::fabs(v);
  const std::uint32_t r = round_to(v, bf16);
  if (round_to(v - err, bf16) == r && round_to(v + err, bf16) == r) return r;
  return exact_round(s, w, H, sc, bf16);
}

// ------------------------------------------------------------------------------------------------------------
bool wants_emulation(const RefOptions& opt) {
  return std::find(opt.emulations.begin(), opt.emulations.end(), "deepgemm-sm90") != opt.emulations.end();
}

constexpr std::uint16_t kBf16NegInf = 0xFF80;

void fill_neg_inf(Tensor& t) {
  if (t.dtype() == DType::bf16) {
    std::fill_n(t.data<std::uint16_t>(), t.numel(), kBf16NegInf);
  } else {
    std::fill_n(t.data<float>(), t.numel(), -std::numeric_limits<float>::infinity());
  }
}
inline void store_bits(Tensor& t, i64 idx, std::uint32_t bits) {
  if (t.dtype() == DType::bf16)
    t.data<std::uint16_t>()[idx] = static_cast<std::uint16_t>(bits);
  else
    t.data<float>()[idx] = num::f32_from_bits(bits);
}
inline std::uint32_t emu_bits(float x, bool bf16) { return bf16 ? num::f32_to_bf16(x) : num::f32_bits(x); }

// Per query row: W as f64 and |W|.
struct WeightsF64 {
  std::vector<double> wd, wa;
  explicit WeightsF64(const Tensor& w) : wd(static_cast<sz>(w.numel())), wa(static_cast<sz>(w.numel())) {
    for (i64 i = 0; i < w.numel(); ++i) {
      wd[static_cast<sz>(i)] = static_cast<double>(w.data<float>()[i]);
      wa[static_cast<sz>(i)] = std::fabs(wd[static_cast<sz>(i)]);
    }
  }
};

// Where the logits of a stage go: value bits, magnitude M and the defined flag, by flat output index.
struct LogitsOut {
  Tensor& value;
  double* M;
  std::uint8_t* defined;
  bool bf16;
};

// One query row (weights at offset wo) against n consecutive keys of a tile, whose exact dot products start at
// c0 (row stride ldc, one column per head): head sums by the ISA path, then the exactly rounded logit (see (2)),
// stored with M at flat outputs o0 .. o0+n-1. scales[k] is key k's kv_scale.
void reduce_keys(const Isa& isa, const double* c0, sz ldc, int n, const WeightsF64& wf, const float* w, sz wo, int H,
                 const float* scales, std::vector<double>& acc, std::vector<double>& mg, LogitsOut out, i64 o0) {
  isa.heads(c0, ldc, n, wf.wd.data() + wo, wf.wa.data() + wo, H, acc.data(), mg.data());
  for (int k = 0; k < n; ++k) {
    const sz ku = static_cast<sz>(k);
    double M;
    const std::uint32_t bits = finish(acc[ku], mg[ku], c0 + ku * ldc, w + wo, H, scales[k], out.bf16, M);
    store_bits(out.value, o0 + k, bits);
    out.M[o0 + k] = M;
    out.defined[o0 + k] = 1;
  }
}

// One query row decoded for the sm90 model, and its emulated logit against one decoded key.
struct EmuRow {
  int H = 0, D = 0;
  std::vector<std::int32_t> sig, exp;
  std::vector<std::uint8_t> nan;
  std::vector<float> s;
  EmuRow(i64 h, i64 d)
      : H(static_cast<int>(h)), D(static_cast<int>(d)), sig(static_cast<sz>(h * d)), exp(sig.size()), nan(static_cast<sz>(h)), s(static_cast<sz>(h)) {}
  void decode(const std::uint8_t* q) {  // H heads of D codes
    for (int h = 0; h < H; ++h)
      nan[static_cast<sz>(h)] = num::sm90::decode_vec(q + h * D, D, sig.data() + h * D, exp.data() + h * D);
  }
  float logit(const std::int32_t* ksig, const std::int32_t* kexp, bool knan, const float* w, float scale) {
    for (int h = 0; h < H; ++h)
      s[static_cast<sz>(h)] = num::sm90::wgmma_dot_vec(sig.data() + h * D, exp.data() + h * D, ksig, kexp, D,
                                                       nan[static_cast<sz>(h)] || knan);
    return num::sm90::head_reduce(s.data(), w, H, scale);
  }
};

}  // namespace

// ============================================================================================================
Expected indexer_logits_ragged(const Case& c, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const Tensor& kvs = c.input("kv_scale");
  const Tensor& wt = c.input("weights");
  const std::int32_t* ks = c.input("ks").data<std::int32_t>();
  const std::int32_t* ke = c.input("ke").data<std::int32_t>();
  const i64 S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0);
  const bool clean = c.attr_bool("clean_logits", true);
  const i64 msk = c.attr_int("max_seqlen_k", 0);
  const bool bf16 = c.attr_str("logits_dtype", "float32") == "bf16";
  const i64 cols = msk > 0 ? msk : N;
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const std::uint8_t* kc = kv.data<std::uint8_t>();
  const float* sc = kvs.data<float>();
  const float* w = wt.data<float>();

  Tensor value(bf16 ? DType::bf16 : DType::f32, {S, cols});
  Tensor mag(DType::f64, {S, cols});
  Tensor def(DType::u8, {S, cols});
  fill_neg_inf(value);
  const bool all_defined = clean && msk == 0;
  if (all_defined) std::fill_n(def.data<std::uint8_t>(), def.numel(), std::uint8_t{1});
  double* Mp = mag.data<double>();
  std::uint8_t* dp = def.data<std::uint8_t>();
  const LogitsOut out{value, Mp, dp, bf16};

  // Key range of row i (clamped to the tensor; the schema check rejects out-of-range ks/ke).
  auto row_lo = [&](i64 i) { return std::clamp<i64>(ks[i], 0, N); };
  auto row_hi = [&](i64 i) {
    i64 hi = std::clamp<i64>(ke[i], row_lo(i), N);
    if (msk > 0) hi = std::min(hi, row_lo(i) + msk);
    return hi;
  };
  auto col_of = [&](i64 i, i64 j) { return msk > 0 ? j - row_lo(i) : j; };

  const WeightsF64 wf(wt);
  const i64 rb = std::max<i64>(1, 256 / std::max<i64>(H, 1));  // q rows per tile (rb * H columns)
  const i64 kb = 120;                                            // keys per tile
  struct Task { i64 i0, i1, j0, j1; };
  std::vector<Task> tasks;
  for (i64 i0 = 0; i0 < S; i0 += rb) {
    const i64 i1 = std::min(S, i0 + rb);
    i64 lo = N, hi = 0;
    for (i64 i = i0; i < i1; ++i)
      if (row_hi(i) > row_lo(i)) lo = std::min(lo, row_lo(i)), hi = std::max(hi, row_hi(i));
    for (i64 j0 = lo; j0 < hi; j0 += kb) tasks.push_back({i0, i1, j0, std::min(hi, j0 + kb)});
  }
  const Isa isa = pick_isa();
  const double* e4d = e4m3_f64_table();
  const int threads = opt.thread_count();
#pragma omp parallel num_threads(threads)
  {
    Tile tile;
    tile.shape(static_cast<int>(kb), static_cast<int>(rb * H), static_cast<int>(D));
    std::vector<double> acc(static_cast<sz>(kb)), mg(static_cast<sz>(kb));
    i64 cur_i0 = -1;
#pragma omp for schedule(dynamic, 1)
    for (sz t = 0; t < tasks.size(); ++t) {
      const Task& T = tasks[t];
      if (T.i0 != cur_i0) {  // tasks of one row block are consecutive: pack Q once per block and thread
        tile.pack_q(qc + T.i0 * H * D, (T.i1 - T.i0) * H, e4d);
        cur_i0 = T.i0;
      }
      isa.decode(kc + T.j0 * D, static_cast<int>((T.j1 - T.j0) * D), tile.K.data());
      std::fill(tile.K.begin() + (T.j1 - T.j0) * D, tile.K.end(), 0.0);
      isa.gemm(tile.K.data(), tile.nkp, tile.Qp.data(), tile.ncp, static_cast<int>(D), tile.C.data());
      for (i64 i = T.i0; i < T.i1; ++i) {
        const i64 jlo = std::max(T.j0, row_lo(i)), jhi = std::min(T.j1, row_hi(i));
        if (jhi <= jlo) continue;
        reduce_keys(isa, tile.c_at(static_cast<int>(jlo - T.j0), static_cast<int>((i - T.i0) * H)),
                    static_cast<sz>(tile.ncp), static_cast<int>(jhi - jlo), wf, w, static_cast<sz>(i * H),
                    static_cast<int>(H), sc + jlo, acc, mg, out, i * cols + col_of(i, jlo));
      }
    }
  }

  RefTensor rt;
  rt.name = "logits";
  rt.kind = CompareKind::bounded;
  rt.mask_must_match = all_defined;

  if (wants_emulation(opt)) {
    Tensor emu(value.dtype(), {S, cols});
    fill_neg_inf(emu);
    std::vector<std::int32_t> ksig(static_cast<sz>(N * D)), kexp(ksig.size());
    std::vector<std::uint8_t> knan(static_cast<sz>(N));
    for (i64 j = 0; j < N; ++j)
      knan[static_cast<sz>(j)] = num::sm90::decode_vec(kc + j * D, static_cast<int>(D), ksig.data() + j * D, kexp.data() + j * D);
#pragma omp parallel num_threads(threads)
    {
      EmuRow er(H, D);
#pragma omp for schedule(dynamic, 1)
      for (i64 i = 0; i < S; ++i) {
        er.decode(qc + i * H * D);
        for (i64 j = row_lo(i); j < row_hi(i); ++j) {
          const float x = er.logit(ksig.data() + j * D, kexp.data() + j * D, knan[static_cast<sz>(j)] != 0, w + i * H, sc[j]);
          store_bits(emu, i * cols + col_of(i, j), emu_bits(x, bf16));
        }
      }
    }
    rt.emulations["deepgemm-sm90"] = emu;
  }

  std::vector<std::int32_t> ksv(ks, ks + S);
  rt.describe = [cols, msk, ksv](i64 f) {
    const i64 i = f / cols, t = f % cols;
    if (msk > 0)
      return "row " + std::to_string(i) + " col " + std::to_string(t) + " (key " + std::to_string(ksv[static_cast<sz>(i)] + t) + ")";
    return "row " + std::to_string(i) + " key " + std::to_string(t);
  };
  rt.value = value;
  rt.magnitude = mag;
  rt.defined = def;
  Expected e;
  e.tensors.push_back(std::move(rt));
  return e;
}

// ============================================================================================================
Expected indexer_logits_paged(const Case& c, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& cache = c.input("kv_cache");
  const Tensor& wt = c.input("weights");
  const Tensor& cl = c.input("context_lens");
  const Tensor& bt = c.input("block_table");
  const i64 B = q.dim(0), NN = q.dim(1), H = q.dim(2), D = q.dim(3);
  const i64 cols = c.attr_int("max_context_len");
  const bool clean = c.attr_bool("clean_logits", false);
  const bool bf16 = c.attr_str("logits_dtype", "float32") == "bf16";
  const KCacheView kvv = KCacheView::of(cache);
  const i64 ps = kvv.layout.page_size, MB = bt.dim(1), R = B * NN;
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const float* w = wt.data<float>();
  const std::int32_t* btp = bt.data<std::int32_t>();

  // Valid columns of row r = b*next_n + t: [0, n_r).
  std::vector<i64> nvalid(static_cast<sz>(R));
  for (i64 b = 0; b < B; ++b)
    for (i64 t = 0; t < NN; ++t) {
      i64 n = cl.rank() == 2 ? cl.data<std::int32_t>()[b * NN + t] : cl.data<std::int32_t>()[b] - NN + t + 1;
      n = std::clamp<i64>(n, 0, std::min(cols, MB * ps));
      nvalid[static_cast<sz>(b * NN + t)] = n;
    }
  auto page_of = [&](i64 b, i64 j) { return static_cast<i64>(btp[b * MB + j / ps]); };

  Tensor value(bf16 ? DType::bf16 : DType::f32, {R, cols});
  Tensor mag(DType::f64, {R, cols});
  Tensor def(DType::u8, {R, cols});
  fill_neg_inf(value);
  if (clean) std::fill_n(def.data<std::uint8_t>(), def.numel(), std::uint8_t{1});
  double* Mp = mag.data<double>();
  std::uint8_t* dp = def.data<std::uint8_t>();
  const LogitsOut out{value, Mp, dp, bf16};

  const WeightsF64 wf(wt);
  const i64 kb = 120;
  struct Task { i64 b, j0, j1; };
  std::vector<Task> tasks;
  for (i64 b = 0; b < B; ++b) {
    i64 hi = 0;
    for (i64 t = 0; t < NN; ++t) hi = std::max(hi, nvalid[static_cast<sz>(b * NN + t)]);
    for (i64 j0 = 0; j0 < hi; j0 += kb) tasks.push_back({b, j0, std::min(hi, j0 + kb)});
  }
  const Isa isa = pick_isa();
  const double* e4d = e4m3_f64_table();
  const int threads = opt.thread_count();
#pragma omp parallel num_threads(threads)
  {
    Tile tile;
    tile.shape(static_cast<int>(kb), static_cast<int>(NN * H), static_cast<int>(D));
    std::vector<float> scl(static_cast<sz>(kb));
    std::vector<double> acc(static_cast<sz>(kb)), mg(static_cast<sz>(kb));
    i64 cur_b = -1;
#pragma omp for schedule(dynamic, 1)
    for (sz ti = 0; ti < tasks.size(); ++ti) {
      const Task& T = tasks[ti];
      if (T.b != cur_b) {
        tile.pack_q(qc + T.b * NN * H * D, NN * H, e4d);
        cur_b = T.b;
      }
      for (i64 j = T.j0; j < T.j0 + tile.nkp; ++j) {
        double* kr = tile.k_row(static_cast<int>(j - T.j0));
        if (j < T.j1) {
          isa.decode(kvv.values(page_of(T.b, j), j % ps), static_cast<int>(D), kr);
          scl[static_cast<sz>(j - T.j0)] = kvv.scale(page_of(T.b, j), j % ps);
        } else {
          std::fill_n(kr, D, 0.0);
        }
      }
      isa.gemm(tile.K.data(), tile.nkp, tile.Qp.data(), tile.ncp, static_cast<int>(D), tile.C.data());
      for (i64 t = 0; t < NN; ++t) {
        const i64 r = T.b * NN + t;
        const i64 jhi = std::min(T.j1, nvalid[static_cast<sz>(r)]);
        if (jhi <= T.j0) continue;
        reduce_keys(isa, tile.c_at(0, static_cast<int>(t * H)), static_cast<sz>(tile.ncp), static_cast<int>(jhi - T.j0),
                    wf, w, static_cast<sz>(r * H), static_cast<int>(H), scl.data(), acc, mg, out, r * cols + T.j0);
      }
    }
  }

  RefTensor rt;
  rt.name = "logits";
  rt.kind = CompareKind::bounded;
  rt.mask_must_match = clean;
  if (wants_emulation(opt)) {
    Tensor emu(value.dtype(), {R, cols});
    fill_neg_inf(emu);
#pragma omp parallel num_threads(threads)
    {
      EmuRow er(H, D);
      std::vector<std::int32_t> ksig(static_cast<sz>(D)), kexp(ksig.size());
#pragma omp for schedule(dynamic, 1)
      for (i64 r = 0; r < R; ++r) {
        const i64 b = r / NN;
        er.decode(qc + r * H * D);
        for (i64 j = 0; j < nvalid[static_cast<sz>(r)]; ++j) {
          const bool knan = num::sm90::decode_vec(kvv.values(page_of(b, j), j % ps), static_cast<int>(D), ksig.data(), kexp.data());
          const float x = er.logit(ksig.data(), kexp.data(), knan, w + r * H, kvv.scale(page_of(b, j), j % ps));
          store_bits(emu, r * cols + j, emu_bits(x, bf16));
        }
      }
    }
    rt.emulations["deepgemm-sm90"] = emu;
  }

  const Tensor btc = bt;  // shares storage
  rt.describe = [cols, NN, ps, MB, btc](i64 f) {
    const i64 r = f / cols, j = f % cols, b = r / NN, t = r % NN;
    std::string s = "batch " + std::to_string(b) + " next_n " + std::to_string(t) + " key " + std::to_string(j);
    if (j / ps < MB)
      s += " (page " + std::to_string(btc.data<std::int32_t>()[b * MB + j / ps]) + " slot " + std::to_string(j % ps) + ")";
    return s;
  };
  rt.value = value;
  rt.magnitude = mag;
  rt.defined = def;
  Expected e;
  e.tensors.push_back(std::move(rt));
  return e;
}

}  // namespace dsa::ref
