// The deepgemm-sm90 emulation on the GPU (emulate_cuda.cu): for every (row, key) of a logits job (the keys and rows
// of engines/logits/logits_cuda.hpp's GpuLogitsJob), the kernel's H WGMMA dot products and head reduction
// through sm90_core.hpp -- the integer and fp32 operations of the CPU emulation, so the same bits. Callable from
// C++20 code; std::runtime_error on a CUDA failure.
#pragma once
#include "engines/logits/logits_cuda.hpp"

namespace dsa::profiles::sm90 {

// out: [job.rows, job.cols] bf16 (u16) or fp32 bits per job.bf16, -inf where a row has no key at that column.
void emulate_logits_cuda(const engines::logits::GpuLogitsJob& job, void* out);

}  // namespace dsa::profiles::sm90
