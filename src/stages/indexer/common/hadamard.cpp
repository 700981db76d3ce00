#include "stages/indexer/common/hadamard.hpp"

#include <cmath>

#include "numerics/formats.hpp"

namespace dsa::indexer {

void fwht_f32(float* v, std::int64_t n) {
  for (std::int64_t h = 1; h < n; h *= 2)
    for (std::int64_t j0 = 0; j0 < n; j0 += 2 * h)
      for (std::int64_t j = j0; j < j0 + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;  // the upper lane computes (-b) + a: the same fp32 value
      }
}

float hadamard_scale_f32(std::int64_t n) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(n))); }

void hadamard_bf16(float* x, std::int64_t n) {
  fwht_f32(x, n);
  const float s = hadamard_scale_f32(n);
  for (std::int64_t i = 0; i < n; ++i) x[i] = num::round_to_bf16(x[i] * s);  // §2.3 step 4: fl32 product, RNE bf16
}

}  // namespace dsa::indexer
