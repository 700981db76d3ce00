#include "numerics/dequant_vec.hpp"

#include <immintrin.h>

#include <cstring>

#include "numerics/formats.hpp"

namespace dsa::num {

// (clang takes target_clones only on a function not declared before without it: the exported name forwards.)
namespace {
__attribute__((target_clones("avx512f", "avx2", "default"))) void e4m3_scale_loop(const std::uint8_t* codes, std::int64_t n, float s,
                                                                                  double* out) {
  const float* t = e4m3_table();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = t[codes[i]] * s;
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    // halfcore::f32_to_bf16 in fp32 bits: NaN -> sign | 0x7FC00000, else RNE at bit 16 (the carry may reach inf).
    const std::uint32_t r = (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u & 0x80000000u) | 0x7FC00000u) : ((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    float f;
    std::memcpy(&f, &r, 4);
    out[i] = static_cast<double>(f);
  }
}
#if defined(__x86_64__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's false positive inside the AVX-512 set1 intrinsics
// The same operations without the table lookup (its gather was most of the loop): a code's magnitude m = code & 0x7F
// placed at bit 20 of an fp32 is e4m3's exponent and mantissa over fp32's, so that fp32 times 2^120 is the code's
// value exactly (an fp32 subnormal for e4m3's subnormals: m 2^-129 2^120 = m 2^-9); magnitude 0x7F is the quiet NaN;
// then the sign bit, the product with s, and f32_to_bf16's bit path as above.
__attribute__((target("avx512f"))) std::int64_t scale_avx512(const std::uint8_t* codes, std::int64_t n, float s, double* out) {
  const __m512i m7f = _mm512_set1_epi32(0x7F), m80 = _mm512_set1_epi32(0x80), abs = _mm512_set1_epi32(0x7FFFFFFF);
  const __m512i inf = _mm512_set1_epi32(0x7F800000), qnan = _mm512_set1_epi32(0x7FC00000), sgn = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i rnd = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1), keep = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m512 big = _mm512_set1_ps(0x1p120f), vs = _mm512_set1_ps(s);
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)));
    const __m512i m = _mm512_and_si512(x, m7f);
    __m512i v = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(m, 20)), big));
    v = _mm512_mask_mov_epi32(v, _mm512_cmpeq_epi32_mask(m, m7f), qnan);
    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(x, m80), 24));
    const __m512i u = _mm512_castps_si512(_mm512_mul_ps(_mm512_castsi512_ps(v), vs));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(_mm512_add_epi32(u, rnd), _mm512_and_si512(_mm512_srli_epi32(u, 16), one)), keep);
    r = _mm512_mask_mov_epi32(r, _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, abs), inf), _mm512_or_si512(_mm512_and_si512(u, sgn), qnan));
    const __m512 f = _mm512_castsi512_ps(r);
    _mm512_storeu_pd(out + i, _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
    _mm512_storeu_pd(out + i + 8, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
  }
  return i;
}

__attribute__((target("avx2"))) std::int64_t scale_avx2(const std::uint8_t* codes, std::int64_t n, float s, double* out) {
  const __m256i m7f = _mm256_set1_epi32(0x7F), m80 = _mm256_set1_epi32(0x80), abs = _mm256_set1_epi32(0x7FFFFFFF);
  const __m256i inf = _mm256_set1_epi32(0x7F800000), qnan = _mm256_set1_epi32(0x7FC00000), sgn = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  const __m256i rnd = _mm256_set1_epi32(0x7FFF), one = _mm256_set1_epi32(1), keep = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256 big = _mm256_set1_ps(0x1p120f), vs = _mm256_set1_ps(s);
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)));
    const __m256i m = _mm256_and_si256(x, m7f);
    __m256i v = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(m, 20)), big));
    v = _mm256_blendv_epi8(v, qnan, _mm256_cmpeq_epi32(m, m7f));
    v = _mm256_or_si256(v, _mm256_slli_epi32(_mm256_and_si256(x, m80), 24));
    const __m256i u = _mm256_castps_si256(_mm256_mul_ps(_mm256_castsi256_ps(v), vs));
    __m256i r = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(u, rnd), _mm256_and_si256(_mm256_srli_epi32(u, 16), one)), keep);
    // |u| and inf are both below 2^31: the signed compare is the unsigned one.
    r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_and_si256(u, sgn), qnan), _mm256_cmpgt_epi32(_mm256_and_si256(u, abs), inf));
    const __m256 f = _mm256_castsi256_ps(r);
    _mm256_storeu_pd(out + i, _mm256_cvtps_pd(_mm256_castps256_ps128(f)));
    _mm256_storeu_pd(out + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1)));
  }
  return i;
}

#pragma GCC diagnostic pop
#endif

__attribute__((target_clones("avx512f", "avx2", "default"))) void bf16_loop(const std::uint16_t* bits, std::int64_t n, double* out) {
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    out[i] = static_cast<double>(f);
  }
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void add_abs_loop(const double* x, std::int64_t n, double* acc) {
  for (std::int64_t i = 0; i < n; ++i) acc[i] += __builtin_fabs(x[i]);
}
}  // namespace

void bf16_to_f64_n(const std::uint16_t* bits, std::int64_t n, double* out) { bf16_loop(bits, n, out); }
void add_abs_n(const double* x, std::int64_t n, double* acc) { add_abs_loop(x, n, acc); }

int e4m3_scale_paths() {  // 2: AVX-512F, 1: AVX2, 0: the scalar loop alone
#if defined(__x86_64__)
  static const int p = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
  }();
  return p;
#else
  return 0;
#endif
}

void e4m3_times_scale_bf16(const std::uint8_t* codes, std::int64_t n, float s, double* out, int path) {
  const int best = e4m3_scale_paths();
  path = path < 0 || path > best ? best : path;
  std::int64_t i = 0;
#if defined(__x86_64__)
  if (path == 2) i = scale_avx512(codes, n, s, out);
  else if (path == 1) i = scale_avx2(codes, n, s, out);
#endif
  e4m3_scale_loop(codes + i, n - i, s, out + i);
}

}  // namespace dsa::num
