// v41.indexer_k: the per-token arithmetic cpu.cpp and cuda.cu share (determinism contract, way 3): the key before its
// quantization, k_norm and RoPE in fp64 with their bound (engines/v4_compress's norm_rope core). Plain C++17, DSA_HD.
#pragma once
#include <cstdint>

#include "engines/v4_compress/norm_rope_core.hpp"

namespace dsa::v41::indexer_k::core {

constexpr std::int64_t kD = 128, kRope = 64;

// One token's key: k_pre (kD bf16), norm_weight (kD bf16), its group start's cos_sin_cache row (cos[32] | sin[32]) ->
// y (the normalized key, bf16-rounded, rotated) and its bound ey.
DSA_HD inline void key_values(const std::uint16_t* k_pre, const std::uint16_t* gamma, const float* cs_row, double eps, double* y, double* ey) {
  float cosr[kRope], sinr[kRope];
  for (std::int64_t i = 0; i < kRope / 2; ++i) {
    cosr[2 * i] = cosr[2 * i + 1] = cs_row[i];
    sinr[2 * i] = sinr[2 * i + 1] = cs_row[kRope / 2 + i];
  }
  for (std::int64_t d = 0; d < kD; ++d) y[d] = halfcore::bf16_to_f64(k_pre[d]), ey[d] = 0.0;
  engines::v4_compress::core::norm_rope(kD, kRope, eps, false, true, y, ey, gamma, cosr, sinr, y, ey);
}

}  // namespace dsa::v41::indexer_k::core
