// The DeepSeek-V4 compressor's arithmetic shared by v4.compressor (the Ascend op's TND form) and v4.compressor_cache
// (vLLM's CUDA kernels writing the paged caches): the gated pool of one entry's window rows and the RMSNorm + RoPE
// after it, each value in fp64 in one fixed order (det_exp) with a rigorous bound on what an fp32 kernel computes
// (spec v4 §2.2-§2.4, §10).
#include "engines/v4_compress/pool.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engines/v4_compress/norm_rope_core.hpp"
#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"

namespace dsa::engines::v4_compress {
using core::gam;

void pool(std::int64_t D_, std::int64_t coff, const std::vector<RowRef>& rows, PoolBug bug, double* C, double* eC) {
  const std::int64_t D = D_;
  const double n = static_cast<double>(rows.size());
  auto off = [&](const RowRef& r) {
    const bool cur = bug == PoolBug::halves_swapped ? !r.current : r.current;
    return coff == 2 && cur ? D : 0;
  };
  if (bug == PoolBug::softmax_over_channels) {  // the gate normalised over channels per row, then summed over rows
    std::fill(C, C + D, 0.0);
    for (const auto& r : rows) {
      if (r.missing) continue;
      const std::int64_t o = off(r);
      double m = -std::numeric_limits<double>::infinity(), L = 0;
      for (std::int64_t c = 0; c < D; ++c) m = std::max(m, r.s[o + c]);
      for (std::int64_t c = 0; c < D; ++c) L += num::det_exp(r.s[o + c] - m);
      for (std::int64_t c = 0; c < D; ++c) C[c] += num::det_exp(r.s[o + c] - m) / L * r.kv[o + c];
    }
    std::fill(eC, eC + D, 0.0);
    return;
  }
  std::vector<double> w(rows.size());
  for (std::int64_t c = 0; c < D; ++c) {
    double m = -std::numeric_limits<double>::infinity(), ds = 0;
    bool nan = false;
    for (const auto& r : rows) {
      const double s = r.missing ? (bug == PoolBug::prev_not_masked ? 0.0 : -std::numeric_limits<double>::infinity()) : r.s[off(r) + c];
      nan |= std::isnan(s);
      m = s > m ? s : m;
      if (!r.missing) ds = std::max(ds, r.es[off(r) + c]);
    }
    if (nan || !(m > -std::numeric_limits<double>::infinity()) || std::isinf(m)) {
      C[c] = std::numeric_limits<double>::quiet_NaN(), eC[c] = 0;
      continue;
    }
    double L = 0;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const auto& r = rows[k];
      const double s = r.missing ? (bug == PoolBug::prev_not_masked ? 0.0 : -std::numeric_limits<double>::infinity()) : r.s[off(r) + c];
      w[k] = num::det_exp(s - m);
      L += w[k];
    }
    double acc = 0, A = 0, E = 0;
    for (std::size_t k = 0; k < rows.size(); ++k) {
      const auto& r = rows[k];
      if (r.missing) continue;  // kv 0 (prev_not_masked: weight > 0 on a zero row)
      const double wk = w[k] / L, kv = r.kv[off(r) + c];
      acc += wk * kv;
      A += wk * std::fabs(kv);
      E += wk * r.ekv[off(r) + c];
    }
    C[c] = acc;
    eC[c] = E + 2.0 * (num::det_exp(2.0 * ds) - 1.0) * A + (0x1p-20 + 2.0 * gam(n)) * A;
  }
}

void norm_rope(std::int64_t D, std::int64_t rope, double eps, bool round_pooled, bool round_normed, const double* C,
               const double* eC, const std::uint16_t* gamma_bf16, const float* cos_row, const float* sin_row, double* y, double* ey) {
  core::norm_rope(D, rope, eps, round_pooled, round_normed, C, eC, gamma_bf16, cos_row, sin_row, y, ey);
}

}  // namespace dsa::engines::v4_compress
