// k_norm LayerNorm of the indexer prolog (spec v32 §2.1: F.layer_norm(k.float(), eps) with fp32 weight/bias,
// biased variance, then .type_as(k) -> bf16).
//
// Fixed, documented order (torch's CUDA kernel uses Welford moments and rsqrtf, whose results depend on the
// launch shape and may be off by 1-2 fp32 ulps; we instead pin the statistics to their (nearly) exact value):
//   mean_d = (sum_i x_i) / n             in double, sequential index order (exact for bf16 inputs unless their
//                                        exponents span more than ~38 binades)
//   var_d  = (sum_i (x_i - mean_d)^2) / n  in double, sequential (two-pass, biased)
//   mean   = fl32(mean_d);  var = fl32(var_d)
//   rstd   = fl32(1 / sqrt(double(fl32(var + fl32(eps)))))     (sigma2 + eps is an fp32 add, as in torch)
//   y_i    = fma(w_i, fl32(rstd * fl32(x_i - mean)), b_i)      torch's elementwise expression
//                                        `gamma * (rstd * (x - mean)) + beta`, which nvcc contracts to an FMA
// Why: the statistics are order- and thread-independent and equal the correctly rounded fp32 mean/rstd in
// practice, so the reference is the best fp32 result; an engine differs only when its 1-2 ulp statistics
// error moves an fp32 value across a bf16 rounding boundary (<= 1 bf16 ulp, rare).
// DSA_HD: the CPU reference and the CUDA backend run this one definition (sqrt and fma are correctly rounded on both).
#pragma once
#include <cstdint>

#include "numerics/hd_ops.hpp"

namespace dsa::num {

// y[0..n) = LayerNorm(x) in fp32 (not yet rounded to bf16). w/b may be null (identity / zero).
DSA_HD inline void layer_norm_f32(const float* x, std::int64_t n, const float* w, const float* b, float eps, float* y) {
  double sum = 0.0;
  for (std::int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]);
  const double mean_d = sum / static_cast<double>(n);
  double sq = 0.0;
  for (std::int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - mean_d;
    sq += d * d;
  }
  const double var_d = sq / static_cast<double>(n);
  const float mean = static_cast<float>(mean_d);
  const float var_eps = static_cast<float>(var_d) + eps;
  const float rstd = static_cast<float>(1.0 / hd::sqrt(static_cast<double>(var_eps)));
  for (std::int64_t i = 0; i < n; ++i) {
    const float nrm = rstd * (x[i] - mean);
    const float wi = w ? w[i] : 1.0f, bi = b ? b[i] : 0.0f;
    y[i] = hd::fma(wi, nrm, bi);
  }
}

}  // namespace dsa::num
