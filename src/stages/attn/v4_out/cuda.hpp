// attn.v4_out's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure. Inputs as cpu.cpp reads them (bf16 bits, fp32 cos / sin rows [T, rope]); the outputs are the host tensors'
// storage (bf16 bits and f64 bounds of o_rot [T, N, D], o_lora [T, G R], output [T, dim]), written whole.
#pragma once
#include <cstdint>

#include "stages/attn/v4_out/core.hpp"

namespace dsa::attn::v4_out {

void v4_out_cuda(const Dims& p, const std::uint16_t* o, const float* cos_rows, const float* sin_rows, const std::uint16_t* wo_a,
                 const std::uint16_t* wo_b, double gKa, double gKb, std::uint16_t* rot, double* rot_m, std::uint16_t* lora,
                 double* lora_m, std::uint16_t* out, double* out_m);

}  // namespace dsa::attn::v4_out
