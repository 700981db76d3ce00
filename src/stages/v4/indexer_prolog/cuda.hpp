// v4.indexer_prolog's CUDA entry points (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on
// a CUDA failure. Each runs one row loop of the reference (RowLoops, stage.hpp) with core.hpp's functions (Bug::none).
#pragma once
#include <cstdint>

#include "stages/v4/indexer_prolog/core.hpp"

namespace dsa::v4::indexer_prolog {

// The q_pre path: pre [T*H, D] bf16 bits, cs / sn [T, 32] (each token's 32 cos / sin values) -> out [T*H, D] bf16
// bits (the reference q_rot) and bound [T*H, D].
void rotate_rows_cuda(const std::uint16_t* pre, std::int64_t T, std::int64_t H, std::int64_t D, const float* cs, const float* sn,
                      HadamardKind kind, std::uint16_t* out, double* bound);
// dynamic_quant_int8 of rows x [R, D] bf16 bits -> codes [R, D], scales [R] (fp16 bits, scale_fp16).
void quant_rows_cuda(const std::uint16_t* x, std::int64_t R, std::int64_t D, AmaxZero az, std::int8_t* codes, std::uint16_t* scales);
// a3_weight of n bf16 values -> fp16 bits.
void weights_cuda(const std::uint16_t* w, std::int64_t n, std::uint16_t* out);
// Kernel vllm-cuda: vllm_q_row of every (token, head) row (RowLoops::vq's arguments).
void vllm_q_cuda(const std::uint16_t* x, std::int64_t T, std::int64_t H, std::int64_t D, const float* cs, const float* sn, const float* w,
                 float sm, float hs, std::uint8_t* codes, double* bound, float* wout, double* wbound);

}  // namespace dsa::v4::indexer_prolog
