// Hadamard rotation `rotate_activation` (spec v32 §2.3): fast Walsh-Hadamard transform in fp32 in the exact
// butterfly order of the fast-hadamard-transform kernel, then an fp32 scale multiply and an RNE cast to bf16.
// DSA_HD: the CPU references and the CUDA backend run these definitions (same fp32 operations, same order).
#pragma once
#include <cstdint>

#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::num {

// In-place unnormalised FWHT of n (a power of two) fp32 values: for h = 1, 2, 4, ..., n/2 the butterflies
// (v[j], v[j+h]) -> (v[j]+v[j+h], v[j]-v[j+h]), each result rounded to fp32. For n = 128 this is the kernel's
// order (in-thread strides 1,2,4 over 8 contiguous elements, then warp lane masks 1,2,4,8 = strides 8..64).
DSA_HD inline void fwht_f32(float* v, std::int64_t n) {
  for (std::int64_t h = 1; h < n; h *= 2)
    for (std::int64_t j0 = 0; j0 < n; j0 += 2 * h)
      for (std::int64_t j = j0; j < j0 + h; ++j) {
        const float a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;  // the upper lane computes (-b) + a: the same fp32 value
      }
}

// fl32(n^-0.5): 0x3DB504F3 for n = 128 (the kernel's scale argument 128**-0.5 as a float).
DSA_HD inline float hadamard_scale_f32(std::int64_t n) { return static_cast<float>(1.0 / hd::sqrt(static_cast<double>(n))); }

// rotate_activation of one bf16 vector given as exact fp32 values: out[i] = bf16(fl32(FWHT(x)[i] * scale)),
// returned as fp32 values (bf16-representable). In-place allowed.
DSA_HD inline void hadamard_bf16(float* x, std::int64_t n) {
  fwht_f32(x, n);
  const float s = hadamard_scale_f32(n);
  for (std::int64_t i = 0; i < n; ++i) x[i] = halfcore::round_to_bf16(x[i] * s);  // §2.3 step 4: fl32 product, RNE bf16
}

}  // namespace dsa::num
