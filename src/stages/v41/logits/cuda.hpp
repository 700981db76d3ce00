// v41.logits's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure. The host resolves every output element's key (KeyRef: the byte offset of its codes in `keys` and its packed
// scale word, or undefined / -inf); the device runs core.hpp's logit for each element with a key.
#pragma once
#include <cstdint>

#include "stages/v41/logits/core.hpp"

namespace dsa::v41::logits {

struct CudaLogitsJob {
  std::int64_t R = 0, H = 0, D = 0, cols = 0, key_bytes = 0;
  const std::uint8_t* q = nullptr;       // [R, H, D/2]
  const std::uint32_t* qsf = nullptr;    // [R, H]
  const double* w = nullptr;             // [R, H]
  const std::uint8_t* keys = nullptr;    // [key_bytes]
  const std::int64_t* off = nullptr;     // [R, cols]: KeyRef::off
  const std::uint32_t* ksf = nullptr;    // [R, cols]: KeyRef::sf
};

void logits_cuda(const CudaLogitsJob& job, core::Logit* out);  // out [R, cols] (elements without a key untouched)

}  // namespace dsa::v41::logits
