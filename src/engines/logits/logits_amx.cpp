// AMX-INT8 path of the exact logits core (see logits_simd.hpp): the exact q.k tiles of logits_engine.hpp (1) from
// int8 tile products, by the Toom-3 digit method of the GPU engine (numerics/exact_digits.hpp). Every e4m3 code
// times 2^9 is an integer x = x2 4096 + x1 64 + x0 with int8 digits; the five planes x0, x1, x2, x(1) = x0+x1+x2,
// x(-1) = x0-x1+x2 of keys and queries give six int8 products with int32 sums (c0 = x0.y0, c1 = x0.y1 + x1.y0,
// c4 = x2.y2, P1 = x(1).y(1), Pm1 = x(-1).y(-1); each below 2^31 for D <= 128), recombined in int64 to the exact
// s * 2^18 (|.| < 2^43, so its conversion to double is exact). The doubles are therefore the fp64 GEMM's bit for bit
// (both exact): the path is invisible in the output. NaN codes have no digits: the caller takes the fp64 path for
// any tile that holds one (Tile::compute).
//
// Tiles: A = 16 keys x 64 dims of a key plane (row-major, stride D), B = 64 dims x 16 columns of a query plane in the
// VNNI order TDPBSSD reads (4 consecutive dims of a column in one dword), C = 16 x 16 int32. Each product runs over a
// 2 x 2 block of C tiles (32 keys x 32 columns: every A and B tile load feeds two products) and is stored; the five
// sums of a block are recombined with AVX-512 into doubles: amx_gemm writes them as the fp64 C of the other paths,
// amx_heads (the stages' path) feeds them straight into the head lanes, overlapped with the next block's products.
#include "engines/logits/logits_simd.hpp"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define DSA_HAVE_AMX_PATH 1
#endif

#include "engines/logits/logits_core.hpp"
#include "numerics/exact_digits.hpp"

namespace dsa::engines::logits {

namespace {

using sz = std::size_t;

// tables[p][code]: plane p (x0, x1, x2, x(1), x(-1)) of the code's digits; NaN codes 0 (never used: see above).
struct DigitTables {
  alignas(64) std::int8_t t[kAmxPlanes][256];
  DigitTables() {
    for (int c = 0; c < 256; ++c) {
      const exactdot::Digits g = exactdot::digits(exactdot::scaled_int(static_cast<std::uint8_t>(c)));
      t[0][c] = g.d[0];
      t[1][c] = g.d[1];
      t[2][c] = g.d[2];
      t[3][c] = exactdot::toom_p1(g);
      t[4][c] = exactdot::toom_m1(g);
    }
  }
};
const DigitTables& digit_tables() {
  static const DigitTables t;
  return t;
}

}  // namespace

bool amx_digit_planes_generic(const std::uint8_t* codes, sz n, std::int8_t* planes, sz plane_stride) {
  const DigitTables& T = digit_tables();
  bool nan = false;
  for (sz i = 0; i < n; ++i) nan |= exactdot::is_nan_code(codes[i]);
  for (int p = 0; p < kAmxPlanes; ++p)
    for (sz i = 0; i < n; ++i) planes[static_cast<sz>(p) * plane_stride + i] = T.t[p][codes[i]];
  return nan;
}

void amx_pack_q_codes(const std::uint8_t* q, std::int64_t n, int ncp, int D, std::uint8_t* dst) {
  // dst[c / 16][d / 4][c % 16][d % 4] = q[c][d]: one dword (4 dims) at a time.
  const sz Du = static_cast<sz>(D);
  for (int c = 0; c < ncp; ++c) {
    std::uint8_t* blk = dst + static_cast<sz>(c / 16) * 16 * Du + static_cast<sz>(c % 16) * 4;
    for (int d = 0; d < D; d += 4) {
      std::uint32_t w = 0;
      if (c < n) std::memcpy(&w, q + static_cast<sz>(c) * Du + static_cast<sz>(d), 4);
      std::memcpy(blk + static_cast<sz>(d / 4) * 64, &w, 4);
    }
  }
}

#if defined(DSA_HAVE_AMX_PATH)

namespace {

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the masked-off source: a -Wmaybe-uninitialized false
// positive at -O3 (all lanes are written).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// The digit planes of n codes (n a multiple of 64): two 128-entry byte permutes per plane, picked by the code's sign.
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) bool planes_vbmi(const std::uint8_t* codes, sz n, std::int8_t* planes,
                                                                        sz plane_stride) {
  const DigitTables& T = digit_tables();
  __m512i lut[kAmxPlanes][4];
  for (int p = 0; p < kAmxPlanes; ++p)
    for (int q = 0; q < 4; ++q) lut[p][q] = _mm512_load_si512(T.t[p] + 64 * q);
  const __m512i low7 = _mm512_set1_epi8(0x7F);
  __mmask64 nan = 0;
  for (sz i = 0; i < n; i += 64) {
    const __m512i x = _mm512_loadu_si512(codes + i);
    const __mmask64 neg = _mm512_movepi8_mask(x);
    nan |= _mm512_cmpeq_epi8_mask(_mm512_and_si512(x, low7), low7);
#pragma GCC unroll 5
    for (int p = 0; p < kAmxPlanes; ++p) {
      const __m512i lo = _mm512_permutex2var_epi8(lut[p][0], x, lut[p][1]);
      const __m512i hi = _mm512_permutex2var_epi8(lut[p][2], x, lut[p][3]);
      _mm512_storeu_si512(planes + static_cast<sz>(p) * plane_stride + i, _mm512_mask_blend_epi8(neg, lo, hi));
    }
  }
  return nan != 0;
}

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

// The exact s of 16 columns (s * 2^18 = 4096 high - 4095 low) from the five int32 sums: two vectors of 8 doubles.
__attribute__((target("avx512f,avx512dq"))) inline void recombine16v(const std::int32_t* c0, const std::int32_t* c1,
                                                                      const std::int32_t* c4, const std::int32_t* p1,
                                                                      const std::int32_t* m1, __m512d& lo, __m512d& hi) {
  const __m512i P = _mm512_load_si512(p1), M = _mm512_load_si512(m1), F = _mm512_load_si512(c4);
  const __m512i L1 = _mm512_load_si512(c1), L0 = _mm512_load_si512(c0);
  // high = (65 P1 - 63 Pm1) / 2 + 4095 c4, low = 64 c1 + c0 (exact_digits.hpp: each below 2^31)
  const __m512i p65 = _mm512_add_epi32(_mm512_slli_epi32(P, 6), P);
  const __m512i m63 = _mm512_sub_epi32(_mm512_slli_epi32(M, 6), M);
  const __m512i f4095 = _mm512_sub_epi32(_mm512_slli_epi32(F, 12), F);
  const __m512i high = _mm512_add_epi32(_mm512_srai_epi32(_mm512_sub_epi32(p65, m63), 1), f4095);
  const __m512i low = _mm512_add_epi32(_mm512_slli_epi32(L1, 6), L0);
  const __m512d scale = _mm512_set1_pd(0x1p-18);
  // 4096 high - 4095 low = 4096 (high - low) + low in int64 (|.| < 2^43: its double is exact, and so is * 2^-18)
  const __m512i h0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(high)), l0 = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(low));
  const __m512i h1 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(high, 1)), l1 = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(low, 1));
  lo = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_add_epi64(_mm512_slli_epi64(_mm512_sub_epi64(h0, l0), 12), l0)), scale);
  hi = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_add_epi64(_mm512_slli_epi64(_mm512_sub_epi64(h1, l1), 12), l1)), scale);
}
__attribute__((target("avx512f,avx512dq"))) inline void recombine16(const std::int32_t* c0, const std::int32_t* c1,
                                                                     const std::int32_t* c4, const std::int32_t* p1,
                                                                     const std::int32_t* m1, double* out) {
  __m512d lo, hi;
  recombine16v(c0, c1, c4, p1, m1, lo, hi);
  _mm512_storeu_pd(out, lo);
  _mm512_storeu_pd(out + 8, hi);
}

// One product of a 2 x 2 block into C tiles 0..3 (A tiles 4, 5: keys jb.. and jb+16.. of key plane KA; B tiles 6, 7:
// columns cb.. and cb+16.. of query plane QB), STEPS k-steps of 64 dims.
template <int STEPS>
__attribute__((target("amx-tile,amx-int8"))) inline void amx_product(const std::int8_t* KA, const std::int8_t* QB) {
  constexpr int D = 64 * STEPS;
#pragma GCC unroll 2
  for (int s = 0; s < STEPS; ++s) {
    _tile_loadd(4, KA + 64 * s, D);
    _tile_loadd(5, KA + 16 * D + 64 * s, D);
    _tile_loadd(6, QB + 1024 * s, 64);
    _tile_loadd(7, QB + 16 * D + 1024 * s, 64);
    _tile_dpbssd(0, 4, 6);
    _tile_dpbssd(1, 4, 7);
    _tile_dpbssd(2, 5, 6);
    _tile_dpbssd(3, 5, 7);
  }
}
__attribute__((target("amx-tile"))) inline void amx_zero4() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
__attribute__((target("amx-tile"))) inline void amx_store4(std::int32_t* o) {
  _tile_stored(0, o, 64);
  _tile_stored(1, o + 256, 64);
  _tile_stored(2, o + 512, 64);
  _tile_stored(3, o + 768, 64);
}

// sums[product][tile][16 x 16] of one 2 x 2 block: c0, c1, c4, P1, Pm1.
using BlockSums = std::int32_t[5][4][256];

// The five products of the 2 x 2 block at K (keys, planes kplane bytes apart) x Q (columns, planes qplane apart) into
// S, after(k) called once product k is stored (the callers put vector work there, overlapping the next product).
template <int STEPS, class After>
__attribute__((target("amx-tile,amx-int8"))) inline void five_products(const std::int8_t* K, sz kplane, const std::int8_t* Q,
                                                                        sz qplane, BlockSums& S, After after) {
  amx_zero4();
  amx_product<STEPS>(K, Q);  // c0 = x0.y0
  amx_store4(S[0][0]);
  after(0);
  amx_zero4();
  amx_product<STEPS>(K, Q + qplane);  // c1 = x0.y1 + x1.y0
  amx_product<STEPS>(K + kplane, Q);
  amx_store4(S[1][0]);
  after(1);
  amx_zero4();
  amx_product<STEPS>(K + 2 * kplane, Q + 2 * qplane);  // c4 = x2.y2
  amx_store4(S[2][0]);
  after(2);
  amx_zero4();
  amx_product<STEPS>(K + 3 * kplane, Q + 3 * qplane);  // P1 = x(1).y(1)
  amx_store4(S[3][0]);
  after(3);
  amx_zero4();
  amx_product<STEPS>(K + 4 * kplane, Q + 4 * qplane);  // Pm1 = x(-1).y(-1)
  amx_store4(S[4][0]);
  after(4);
}

// The tile configuration is per thread: loaded on a thread's first amx_gemm / amx_heads, released by amx_release.
thread_local bool tiles_configured = false;

__attribute__((target("amx-tile"))) inline void configure_tiles() {
  if (tiles_configured) return;
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  _tile_loadconfig(&cfg);
  tiles_configured = true;
}

// Rows [r0, r1) of a 32 x 32 block's doubles (block row i = 16 * (t >> 1) + r of tiles t = 2 (i >> 4) + 0, 1).
__attribute__((target("avx512f,avx512dq"))) inline void recombine_rows(const BlockSums& S, int r0, int r1, double* C,
                                                                        sz ldc) {
  for (int i = r0; i < r1; ++i) {
    const int th = i >> 4, e = 16 * (i & 15);
    double* out = C + static_cast<sz>(i) * ldc;
#pragma GCC unroll 2
    for (int tw = 0; tw < 2; ++tw) {
      const int t = 2 * th + tw;
      recombine16(S[0][t] + e, S[1][t] + e, S[2][t] + e, S[3][t] + e, S[4][t] + e, out + 16 * tw);
    }
  }
}

// The five products of each block run on the tile unit while the vector unit recombines the previous block's sums
// (a fifth of its rows after each product), so neither waits for the other.
template <int STEPS>
__attribute__((target("amx-tile,amx-int8,avx512f,avx512dq"))) void gemm_amx_t(const std::int8_t* Kd, int nka,
                                                                               const std::int8_t* Qd, int ncp, double* C,
                                                                               sz ldc) {
  constexpr int D = 64 * STEPS;
  configure_tiles();
  const sz kplane = static_cast<sz>(nka) * D, qplane = static_cast<sz>(ncp) * D;
  alignas(64) BlockSums sums[2];
  static constexpr int kRows[6] = {0, 7, 13, 20, 26, 32};
  double* prev = nullptr;  // the previous block's C corner; its sums are the other half of `sums`
  int n = 0;
  for (int jb = 0; jb < nka; jb += 32)
    for (int cb = 0; cb < ncp; cb += 32, ++n) {
      const std::int8_t* K = Kd + static_cast<sz>(jb) * D;
      const std::int8_t* Q = Qd + static_cast<sz>(cb) * D;
      const BlockSums& P = sums[(n + 1) & 1];
      five_products<STEPS>(K, kplane, Q, qplane, sums[n & 1], [&](int k) {
        if (prev) recombine_rows(P, kRows[k], kRows[k + 1], prev, ldc);
      });
      prev = C + static_cast<sz>(jb) * ldc + static_cast<sz>(cb);
    }
  if (prev) recombine_rows(sums[(n + 1) & 1], 0, 32, prev, ldc);
}

// ---- The fused path: products and the head lanes of HeadFn without materializing C ----

// Head lanes of block keys [r0, r1) over the 32 heads hb.. of one column block (sums S): per key r the lanes
// L[r][0..7] (a) and L[r][8..15] (m) of HeadFn, a = fma(max(0, s_h), wd_h, a) 8 heads at a time in increasing h,
// exactly heads_avx512's operations (first: the lanes start at +0).
__attribute__((target("avx512f,avx512dq,fma"))) void lanes_update(const BlockSums& S, int r0, int r1, const double* wd,
                                                                   const double* wa, double (*L)[16], bool first) {
  const __m512d zero = _mm512_setzero_pd();
  __m512d wv[4], av[4];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) wv[g] = _mm512_loadu_pd(wd + 8 * g), av[g] = _mm512_loadu_pd(wa + 8 * g);
  for (int r = r0; r < r1; ++r) {
    const int t = 2 * (r >> 4), e = 16 * (r & 15);
    __m512d va = first ? zero : _mm512_load_pd(L[r]), vm = first ? zero : _mm512_load_pd(L[r] + 8);
    __m512d s[4];  // heads hb + 8 g .. hb + 8 g + 7
    recombine16v(S[0][t] + e, S[1][t] + e, S[2][t] + e, S[3][t] + e, S[4][t] + e, s[0], s[1]);
    recombine16v(S[0][t + 1] + e, S[1][t + 1] + e, S[2][t + 1] + e, S[3][t + 1] + e, S[4][t + 1] + e, s[2], s[3]);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
      const __m512d rl = _mm512_max_pd(zero, s[g]);
      va = _mm512_fmadd_pd(rl, wv[g], va);
      vm = _mm512_fmadd_pd(rl, av[g], vm);
    }
    _mm512_store_pd(L[r], va);
    _mm512_store_pd(L[r] + 8, vm);
  }
}

// Work units (32-key block, row, 32-head block) in order. Each unit's five products go to one half of S; after each
// product, a fifth of the previous unit's key rows run their head lanes from the other half. The tile unit works
// through a product while the vector unit runs those lanes: at any time the reorder buffer holds one product's tile
// instructions and a fifth of a unit's vector work, so both stay busy (a whole unit's lanes after all five products
// would wait behind the tile instructions).
template <int STEPS>
__attribute__((target("amx-tile,amx-int8,avx512f,avx512dq,fma"))) void heads_amx_t(const std::int8_t* Kd, int na,
                                                                                     const std::int8_t* Qd, int ncp,
                                                                                     int H, const AmxRow* rows,
                                                                                     int nrows) {
  constexpr int D = 64 * STEPS;
  configure_tiles();
  const sz kplane = static_cast<sz>(na) * D, qplane = static_cast<sz>(ncp) * D;
  struct Unit {
    int jb, x, hb, r0, r1;
  };
  alignas(64) BlockSums S[2];
  alignas(64) double L[32][16];
  alignas(64) double lane[8];
  // Part k (0..4) of unit u's key rows: head lanes from sums, then (last head block) the row's acc and mag.
  auto lanes_part = [&](const Unit& u, const BlockSums& sums, int k) {
    const AmxRow& R = rows[u.x];
    const int n = u.r1 - u.r0, a = u.r0 + n * k / 5, b = u.r0 + n * (k + 1) / 5;
    if (b <= a) return;
    lanes_update(sums, a, b, R.wd + u.hb, R.wa + u.hb, L, u.hb == 0);
    if (u.hb + 32 < H) return;
    for (int r = a; r < b; ++r) {
      std::memcpy(lane, L[r], sizeof lane);
      R.acc[u.jb + r] = core::tree8(lane);
      std::memcpy(lane, L[r] + 8, sizeof lane);
      R.mag[u.jb + r] = core::tree8(lane);
    }
  };
  Unit prev{};
  bool have_prev = false;
  int ci = 0;  // the current unit's half of S; the previous unit's is ci ^ 1
  for (int jb = 0; jb < na; jb += 32)
    for (int x = 0; x < nrows; ++x) {
      const AmxRow& R = rows[x];
      const int r0 = std::max(R.j0, jb) - jb, r1 = std::min(R.j1, jb + 32) - jb;
      if (r1 <= r0) continue;
      for (int hb = 0; hb < H; hb += 32) {
        const std::int8_t* K = Kd + static_cast<sz>(jb) * D;
        const std::int8_t* Q = Qd + static_cast<sz>(R.c0 + hb) * D;
        const BlockSums& old = S[ci ^ 1];
        five_products<STEPS>(K, kplane, Q, qplane, S[ci], [&](int k) {
          if (have_prev) lanes_part(prev, old, k);
        });
        prev = {jb, x, hb, r0, r1};
        have_prev = true;
        ci ^= 1;
      }
    }
  if (have_prev)
    for (int k = 0; k < 5; ++k) lanes_part(prev, S[ci ^ 1], k);
}

#pragma GCC diagnostic pop

bool cpu_has_amx_path() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1, vbmi = (c >> 1) & 1;
  const bool avx512f = (b >> 16) & 1, avx512dq = (b >> 17) & 1, avx512bw = (b >> 30) & 1;
  if (!(amx_tile && amx_int8 && vbmi && avx512f && avx512dq && avx512bw)) return false;
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return false;  // the OS saves the AVX-512 state
  // Linux hands out the tile data state only on request (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA).
  return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
}

}  // namespace

bool amx_available() {
  static const bool ok = cpu_has_amx_path();
  return ok;
}

bool amx_digit_planes(const std::uint8_t* codes, sz n, std::int8_t* planes, sz plane_stride) {
  if (amx_available() && n % 64 == 0) return planes_vbmi(codes, n, planes, plane_stride);
  return amx_digit_planes_generic(codes, n, planes, plane_stride);
}

void amx_gemm(const std::int8_t* Kd, int nka, const std::int8_t* Qd, int ncp, int D, double* C, sz ldc) {
  if (D == 128) return gemm_amx_t<2>(Kd, nka, Qd, ncp, C, ldc);
  gemm_amx_t<1>(Kd, nka, Qd, ncp, C, ldc);
}

void amx_heads(const std::int8_t* Kd, int na, const std::int8_t* Qd, int ncp, int D, int H, const AmxRow* rows, int nrows) {
  if (D == 128) return heads_amx_t<2>(Kd, na, Qd, ncp, H, rows, nrows);
  heads_amx_t<1>(Kd, na, Qd, ncp, H, rows, nrows);
}

__attribute__((target("amx-tile"))) void amx_release() {
  if (!tiles_configured) return;
  _tile_release();
  tiles_configured = false;
}

#else

bool amx_available() { return false; }
bool amx_digit_planes(const std::uint8_t* codes, sz n, std::int8_t* planes, sz plane_stride) {
  return amx_digit_planes_generic(codes, n, planes, plane_stride);
}
void amx_gemm(const std::int8_t*, int, const std::int8_t*, int, int, double*, sz) {}
void amx_heads(const std::int8_t*, int, const std::int8_t*, int, int, int, const AmxRow*, int) {}
void amx_release() {}

#endif

}  // namespace dsa::engines::logits
