// The fast exact core of the indexer logits stages (logits_ragged, logits_paged): exact fp64 q.k tiles (any order
// gives the same bits, proof in logits_engine.hpp (1)), e4m3 decoding and the 8-lane head sums of (2), each with a
// generic, an AVX2 and an AVX-512 path doing the same IEEE operations in the same order. Runtime dispatch;
// DSA_LOGITS_ISA=generic|avx2|avx512 caps the path (tests compare the paths).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
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
};

Isa pick_isa();

// e4m3 code -> f64 (the exact value of num::e4m3_table() widened; NaN codes give the widened table NaN).
const double* e4m3_f64_table();

// Per-thread tile buffers.
struct Tile {
  int D = 0, nkp = 0, ncp = 0;
  std::vector<double> K, Qp, C;
  void shape(int kb, int nc, int d) {
    D = d;
    nkp = (kb + kKT - 1) / kKT * kKT;
    ncp = (nc + kCT - 1) / kCT * kCT;
    K.assign(static_cast<std::size_t>(nkp) * static_cast<std::size_t>(D), 0.0);
    Qp.assign(static_cast<std::size_t>(ncp) * static_cast<std::size_t>(D), 0.0);
    C.assign(static_cast<std::size_t>(nkp) * static_cast<std::size_t>(ncp), 0.0);
  }
  double* k_row(int j) { return K.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(D); }
  // Packs n consecutive q rows of D e4m3 codes (decoded through the exact f64 table e4d) in 32-column tiles.
  void pack_q(const std::uint8_t* q, std::int64_t n, const double* e4d) {
    std::fill(Qp.begin(), Qp.end(), 0.0);
    for (std::int64_t x = 0; x < n; ++x) {
      const std::uint8_t* src = q + x * D;
      double* dst = Qp.data() + static_cast<std::size_t>(x / kCT) * static_cast<std::size_t>(D * kCT) + static_cast<std::size_t>(x % kCT);
      for (int d = 0; d < D; ++d) dst[static_cast<std::size_t>(d) * kCT] = e4d[src[d]];
    }
  }
  const double* c_at(int j, int c) const { return C.data() + static_cast<std::size_t>(j) * static_cast<std::size_t>(ncp) + static_cast<std::size_t>(c); }
};


}  // namespace dsa::engines::logits
