// indexer.prolog's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a
// CUDA failure. Inputs as in cpu.cpp (bf16 bits, fp32), cs / sn the tokens' RoPE rows [T, rope_dim/2] (rope_rows);
// every output buffer is the host tensor's storage, written whole.
#pragma once
#include <cstdint>

#include "stages/indexer/prolog/core.hpp"

namespace dsa::indexer::prolog {

struct HostOut {
  std::uint8_t *q_fp8, *k_fp8;
  float *q_scale, *k_scale, *weights;
  std::uint16_t *k_norm, *k_rope, *k_rot, *q_rope, *q_rot;
};

void prolog_cuda(const TokenParams& tp, std::int64_t T, std::int64_t H, std::int64_t Dh, const std::uint16_t* q, const std::uint16_t* k,
                 const float* w, const float* ln_weight, const float* ln_bias, const float* cs, const float* sn, float sm_scale,
                 const HostOut& out);

}  // namespace dsa::indexer::prolog
