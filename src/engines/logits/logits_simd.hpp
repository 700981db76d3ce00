// The fast exact core of the indexer logits stages (logits_ragged, logits_paged): exact fp64 q.k tiles (any order
// gives the same bits, proof in logits_engine.hpp (1)), e4m3 decoding and the 8-lane head sums of (2), each with a
// generic, an AVX2 and an AVX-512 path doing the same IEEE operations in the same order, and the q.k tiles also on
// AMX-INT8 (logits_amx.cpp: exact integers, so the same doubles). Runtime dispatch;
// DSA_LOGITS_ISA=generic|avx2|avx512|amx caps the path (tests compare the paths).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace dsa::engines::logits {

// Exact q.k tiles: C[j][c] = sum_d K[j][d] * Q[c][d]. K: nkp x D row-major (nkp a multiple of 6, zero padded),
// Qp: Q packed in tiles of 32 columns, Qp[(ct * D + d) * 32 + x] = Q[ct*32 + x][d] (ncp a multiple of 32),
// C: nkp x ncp row-major.
constexpr int kCT = 32;
constexpr int kKT = 6;
using GemmFn = void (*)(const double* K, int nkp, const double* Qp, int ncp, int D, double* C);
// Decode n e4m3 codes to f64.
using DecodeFn = void (*)(const std::uint8_t* src, int n, double* dst);
// Pre-scale head sums of nj logits (key j at C + j * ldc, H contiguous head scores): per logit the 8-lane sums
// a[l] = sum_{h = l mod 8} relu(s_h) * wd_h (in increasing h; tail h >= H/8*8 into lane 0) and likewise m with wa,
// then ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)).
using HeadFn = void (*)(const double* C, std::size_t ldc, int nj, const double* wd, const double* wa, int H, double* acc,
                        double* mag);

struct Isa {
  GemmFn gemm;
  HeadFn heads;
  DecodeFn decode;
  bool amx = false;  // exact q.k tiles on AMX-INT8 (logits_amx.cpp) where no NaN code is involved
};

// AMX-INT8 exact q.k tiles (logits_amx.cpp): digit planes x0, x1, x2, x(1), x(-1) of e4m3 codes (exact_digits.hpp).
constexpr int kAmxPlanes = 5;
// This CPU runs the AMX path (AMX-TILE, AMX-INT8, AVX-512 F/BW/DQ/VBMI, and Linux granted the tile state).
bool amx_available();
// planes[p * plane_stride + i] = digit plane p of codes[i], i < n; returns whether a NaN code (no digits) is among them.
bool amx_digit_planes(const std::uint8_t* codes, std::size_t n, std::int8_t* planes, std::size_t plane_stride);
bool amx_digit_planes_generic(const std::uint8_t* codes, std::size_t n, std::int8_t* planes, std::size_t plane_stride);
// C[j][c] (row stride ldc) = sum_d K[j][d] Q[c][d] exactly, j < nka, c < ncp, from the digit planes: Kd plane p at
// Kd + p * nka * D, nka x D row-major; Qd plane p at Qd + p * ncp * D, blocks of 16 columns in TDPBSSD's order,
// Qd[p][c / 16][d / 4][c % 16][d % 4]. nka and ncp multiples of 32, D 64 or 128, Kd and Qd 64-byte aligned (else
// 3x slower). Only where amx_available().
void amx_gemm(const std::int8_t* Kd, int nka, const std::int8_t* Qd, int ncp, int D, double* C, std::size_t ldc);
// One query row of a key tile for amx_heads: its H columns start at c0 (a multiple of 32), keys [j0, j1) of the tile,
// weights wd/wa (H doubles, HeadFn's); acc[j], mag[j] receive HeadFn's pre-scale head sums of key j (tile index).
struct AmxRow {
  int c0, j0, j1;
  const double *wd, *wa;
  double *acc, *mag;
};
// HeadFn's acc and mag of every row's keys, from the same exact s as amx_gemm but without storing them: the products of
// each 32-key x 32-column block feed the head lanes at once (the same IEEE operations in the same order as
// heads_avx512, so the same bits). H a multiple of 32; Kd holds na keys (a multiple of 32) as amx_gemm's.
void amx_heads(const std::int8_t* Kd, int na, const std::int8_t* Qd, int ncp, int D, int H, const AmxRow* rows, int nrows);
// amx_gemm leaves the calling thread's tile configuration loaded (one load per thread, not per call); this releases it.
void amx_release();
// The query codes of n columns (column c: D codes at q + c * D) in that block order, columns n .. ncp-1 zero.
void amx_pack_q_codes(const std::uint8_t* q, std::int64_t n, int ncp, int D, std::uint8_t* dst);
inline bool amx_shape_ok(int D) { return D == 64 || D == 128; }

Isa pick_isa();

// e4m3 code -> f64 (the exact value of num::e4m3_table() widened; NaN codes give the widened table NaN).
const double* e4m3_f64_table();

// 64-byte aligned storage: an AMX tile row that straddles two cache lines costs three times as much.
template <class T>
struct Align64 {
  using value_type = T;
  Align64() = default;
  template <class U>
  Align64(const Align64<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const Align64<U>&) const { return true; }
};

// Per-thread tile buffers: load_q once per query block, key_row(j) codes of the tile's keys, compute(nk).
struct Tile {
  Tile() = default;
  Tile(const Tile&) = delete;
  Tile& operator=(const Tile&) = delete;
  ~Tile() {
    if (amx) amx_release();  // the thread that used it (a Tile lives in one thread)
  }
  int D = 0, nkp = 0, ncp = 0, nka = 0;
  bool amx = false;
  std::vector<double> K, Qp, C;
  std::vector<std::uint8_t, Align64<std::uint8_t>> Kc, Qc;  // key codes (rows >= nk zero for compute); AMX: query codes in block order
  std::vector<std::int8_t, Align64<std::int8_t>> Kd, Qd;     // AMX digit planes (64-byte aligned rows)
  const std::uint8_t* q = nullptr;   // the query block's codes (n columns of D)
  std::int64_t qn = 0;
  bool q_nan = false, qp_ready = false;
  void shape(const Isa& isa, int kb, int nc, int d) {
    D = d;
    nkp = (kb + kKT - 1) / kKT * kKT;
    ncp = (nc + kCT - 1) / kCT * kCT;
    nka = (kb + 31) / 32 * 32;
    amx = isa.amx && amx_shape_ok(d);
    const int rows = std::max(nkp, amx ? nka : 0);
    K.assign(static_cast<std::size_t>(nkp) * static_cast<std::size_t>(D), 0.0);
    Qp.assign(static_cast<std::size_t>(ncp) * static_cast<std::size_t>(D), 0.0);
    C.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(ncp), 0.0);
    Kc.assign(static_cast<std::size_t>(rows) * static_cast<std::size_t>(D), 0);
    if (amx) {
      Qc.assign(static_cast<std::size_t>(ncp) * static_cast<std::size_t>(D), 0);
      Kd.assign(static_cast<std::size_t>(kAmxPlanes) * static_cast<std::size_t>(nka) * static_cast<std::size_t>(D), 0);
      Qd.assign(static_cast<std::size_t>(kAmxPlanes) * static_cast<std::size_t>(ncp) * static_cast<std::size_t>(D), 0);
    }
  }
  std::uint8_t* key_row(int j) { return Kc.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(D); }
  // The query block: n consecutive q rows of D e4m3 codes (kept by pointer until the next load_q).
  void load_q(const std::uint8_t* codes, std::int64_t n, const double* e4d) {
    q = codes;
    qn = n;
    qp_ready = false;
    q_nan = false;
    if (amx) {
      amx_pack_q_codes(codes, n, ncp, D, Qc.data());
      q_nan = amx_digit_planes(Qc.data(), Qc.size(), Qd.data(), Qc.size());
    }
    if (!amx || q_nan) pack_q(e4d);
  }
  // The AMX digit planes of keys [0, nk) (codes in key_row(j); the rows up to the next multiple of 32 are cleared
  // here) for amx_gemm / amx_heads with na = a_keys(nk); false where the AMX path is off or a NaN code is among the
  // query block's or these keys' codes (their products have no digits: the fp64 path of compute then runs).
  bool amx_keys(int nk) {
    if (!amx || q_nan) return false;
    const std::size_t plane = static_cast<std::size_t>(a_keys(nk)) * static_cast<std::size_t>(D);
    std::fill(Kc.begin() + static_cast<std::ptrdiff_t>(nk) * D, Kc.begin() + static_cast<std::ptrdiff_t>(plane), std::uint8_t{0});
    return !amx_digit_planes(Kc.data(), plane, Kd.data(), plane);
  }
  static int a_keys(int nk) { return (nk + 31) / 32 * 32; }
  // C[j][c] for keys j < nk (codes in key_row(j); rows from nk on are cleared here) and every query column.
  void compute(const Isa& isa, int nk, const double* e4d) {
    if (amx_keys(nk)) {
      amx_gemm(Kd.data(), a_keys(nk), Qd.data(), ncp, D, C.data(), static_cast<std::size_t>(ncp));
      return;
    }
    const std::size_t used = static_cast<std::size_t>(nk) * static_cast<std::size_t>(D);
    if (!qp_ready) pack_q(e4d);
    isa.decode(Kc.data(), static_cast<int>(used), K.data());
    std::fill(K.begin() + static_cast<std::ptrdiff_t>(used), K.end(), 0.0);
    isa.gemm(K.data(), nkp, Qp.data(), ncp, D, C.data());
  }
  const double* c_at(int j, int c) const { return C.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(ncp) + static_cast<std::size_t>(c); }

 private:
  // Q packed in tiles of 32 columns (decoded through the exact f64 table e4d), the fp64 GemmFn's order.
  void pack_q(const double* e4d) {
    std::fill(Qp.begin(), Qp.end(), 0.0);
    for (std::int64_t x = 0; x < qn; ++x) {
      const std::uint8_t* src = q + x * D;
      double* dst = Qp.data() + static_cast<std::size_t>(x / kCT) * static_cast<std::size_t>(D * kCT) + static_cast<std::size_t>(x % kCT);
      for (int d = 0; d < D; ++d) dst[static_cast<std::size_t>(d) * kCT] = e4d[src[d]];
    }
    qp_ready = true;
  }
};

}  // namespace dsa::engines::logits
