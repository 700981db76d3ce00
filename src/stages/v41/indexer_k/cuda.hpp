// v41.indexer_k's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure. One thread per writing token runs core.hpp's key_values (k_norm and RoPE with the bound).
#pragma once
#include <cstdint>

namespace dsa::v41::indexer_k {

struct CudaKeyJob {
  std::int64_t E = 0, T = 0, rows = 0;  // writing tokens, k_pre rows, cos_sin_cache rows
  double eps = 0;
  const std::int64_t* token = nullptr;  // [E]: the token
  const std::int64_t* group = nullptr;  // [E]: its group start's cos_sin_cache row
  const std::uint16_t* k_pre = nullptr;  // [T, 128] bf16
  const std::uint16_t* gamma = nullptr;  // [128] bf16
  const float* cos_sin = nullptr;        // [rows, 64]
};

void keys_cuda(const CudaKeyJob& job, double* y, double* ey);  // y, ey [E, 128]

}  // namespace dsa::v41::indexer_k
