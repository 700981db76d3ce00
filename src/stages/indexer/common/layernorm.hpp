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
#pragma once
#include <cstdint>

namespace dsa::indexer {

// y[0..n) = LayerNorm(x) in fp32 (not yet rounded to bf16). w/b may be null (identity / zero).
void layer_norm_f32(const float* x, std::int64_t n, const float* w, const float* b, float eps, float* y);

}  // namespace dsa::indexer
