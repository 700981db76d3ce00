#include "stages/indexer/common/layernorm.hpp"

#include <cmath>

namespace dsa::indexer {

void layer_norm_f32(const float* x, std::int64_t n, const float* w, const float* b, float eps, float* y) {
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
  const float rstd = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var_eps)));
  for (std::int64_t i = 0; i < n; ++i) {
    const float nrm = rstd * (x[i] - mean);
    const float wi = w ? w[i] : 1.0f, bi = b ? b[i] : 0.0f;
    y[i] = std::fma(wi, nrm, bi);
  }
}

}  // namespace dsa::indexer
