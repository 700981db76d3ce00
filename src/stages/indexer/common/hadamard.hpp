// Hadamard rotation `rotate_activation` (spec v32 §2.3): fast Walsh-Hadamard transform in fp32 in the exact
// butterfly order of the fast-hadamard-transform kernel, then an fp32 scale multiply and an RNE cast to bf16.
#pragma once
#include <cstdint>

namespace dsa::indexer {

// In-place unnormalised FWHT of n (a power of two) fp32 values: for h = 1, 2, 4, ..., n/2 the butterflies
// (v[j], v[j+h]) -> (v[j]+v[j+h], v[j]-v[j+h]), each result rounded to fp32. For n = 128 this is the kernel's
// order (in-thread strides 1,2,4 over 8 contiguous elements, then warp lane masks 1,2,4,8 = strides 8..64).
void fwht_f32(float* v, std::int64_t n);

// fl32(n^-0.5): 0x3DB504F3 for n = 128 (the kernel's scale argument 128**-0.5 as a float).
float hadamard_scale_f32(std::int64_t n);

// rotate_activation of one bf16 vector given as exact fp32 values: out[i] = bf16(fl32(FWHT(x)[i] * scale)),
// returned as fp32 values (bf16-representable). In-place allowed.
void hadamard_bf16(float* x, std::int64_t n);

}  // namespace dsa::indexer
