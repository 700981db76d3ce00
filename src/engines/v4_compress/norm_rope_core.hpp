// The RMSNorm + interleaved RoPE of the DeepSeek-V4 / V4.1 compressors and of the V4.1 indexer K store, with its
// rigorous bound, as one DSA_HD sequence of IEEE fp64 operations (determinism contract, way 3: -ffp-contract=off,
// --fmad=false; sqrt correctly rounded on both sides): the host (pool.cpp's norm_rope) and CUDA kernels
// (v41.indexer_k's cuda.cu) compute the same bits. Plain C++17 with DSA_HD numerics only.
#pragma once
#include <cstdint>

#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::engines::v4_compress::core {

DSA_HD inline double gam(double n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }
DSA_HD inline double bf16v(double v) { return halfcore::bf16_to_f64(halfcore::f64_to_bf16(v)); }
// Largest distance between bf16(v) and the bf16 rounding of any value within e of v.
DSA_HD inline double rb(double v, double e) {
  if (!(e > 0)) return 0.0;
  const double r = bf16v(v);
  return hd::max(hd::abs(bf16v(v + e) - r), hd::abs(bf16v(v - e) - r));
}

// y = C / sqrt(mean C^2 + eps) * gamma, then interleaved RoPE of the last `rope` dims, with the bound ey of an fp32
// kernel (see pool.hpp's norm_rope). y / ey may be C / eC (in place) or distinct arrays of D values.
DSA_HD inline void norm_rope(std::int64_t D, std::int64_t rope, double eps, bool round_pooled, bool round_normed, const double* C,
                             const double* eC, const std::uint16_t* gamma_bf16, const float* cos_row, const float* sin_row, double* y,
                             double* ey) {
  const std::int64_t nope = D - rope;
  for (std::int64_t c = 0; c < D; ++c) {
    const double x = C[c], ex = eC[c];
    ey[c] = round_pooled ? rb(x, ex) : ex;
    y[c] = round_pooled ? bf16v(x) : x;
  }
  double ss = 0, dss = 0;
  for (std::int64_t c = 0; c < D; ++c) {
    ss += y[c] * y[c];
    dss += 2.0 * hd::abs(y[c]) * ey[c] + ey[c] * ey[c];
  }
  const double rho = hd::sqrt(ss / static_cast<double>(D) + eps);
  const double erho = (dss + gam(static_cast<double>(D)) * ss) / (static_cast<double>(D) * 2.0 * rho) * (1 + 1e-9) + 0x1p-22 * rho;
  for (std::int64_t c = 0; c < D; ++c) {
    const double g = halfcore::bf16_to_f64(gamma_bf16[c]), x = y[c], ex = ey[c];
    y[c] = x / rho * g;
    ey[c] = hd::abs(g) * (ex / rho + hd::abs(x) * erho / (rho * rho) * (1 + 1e-6)) + 0x1p-22 * hd::abs(y[c]);
    if (round_normed) ey[c] = rb(y[c], ey[c]), y[c] = bf16v(y[c]);
  }
  for (std::int64_t i = 0; i < rope / 2; ++i) {
    const std::int64_t a = nope + 2 * i, b = a + 1;
    const double c0 = cos_row[2 * i], s0 = sin_row[2 * i], c1 = cos_row[2 * i + 1], s1 = sin_row[2 * i + 1];
    const double ya = y[a] * c0 - y[b] * s0, yb = y[b] * c1 + y[a] * s1;
    const double ea = ey[a] * hd::abs(c0) + ey[b] * hd::abs(s0) + 0x1p-23 * (hd::abs(y[a] * c0) + hd::abs(y[b] * s0));
    const double eb = ey[b] * hd::abs(c1) + ey[a] * hd::abs(s1) + 0x1p-23 * (hd::abs(y[b] * c1) + hd::abs(y[a] * s1));
    y[a] = ya, y[b] = yb, ey[a] = ea, ey[b] = eb;
  }
}

}  // namespace dsa::engines::v4_compress::core
