// attn.v4_out — the DeepSeek-V4 attention output path after the sparse attention (spec v4 §4.4; seed 004
// AscendDSAImpl.forward + _forward_o_proj, non-A5 branch):
//   o_rot  = inplace_partial_rotary_mul(o, cos, -sin, interleave, partial_slice [nope, D]): dims < nope unchanged;
//            rope pair (2i, 2i+1) of the last rope_dim dims, with the query row's cos/sin rows (interleave-duplicated
//            fp32 tables, the same rows as the forward RoPE at the query position):
//              y[2i]   = x[2i]   cos[2i]   + x[2i+1] sin[2i]
//              y[2i+1] = x[2i+1] cos[2i+1] - x[2i]   sin[2i+1]          (sin -> -sin: the inverse rotation)
//            in fp32, rounded once to bf16
//   o_lora = npu_transpose_batchmatmul(o_rot.view(T, G, N*D/G), wo_a.view(G, R, N*D/G)) [T, G, R]: group g = heads
//            [g N/G, (g+1) N/G), contiguous; u[t,g,r] = sum_k o_rot[t,g,k] wo_a[g R + r, k]; bf16 operands, fp32
//            accumulation, bf16 out
//   output = wo_b(o_lora.view(T, G*R)) [T, dim]: y[t,d] = sum_j u[t,j] wo_b[d,j]; bf16 out
// Each output is optional in a dump. Each is computed from the reference's own upstream output, whose bound is carried
// through (sum_k |w_k| M_k): a kernel's legitimate rounding upstream stays inside, and the first failing output in this
// order is where a bug starts.
// The reference: exact products (bf16 x fp32 and bf16 x bf16 fit in f64), fixed-order f64 sums, one rounding to
// bf16. Bounds (policy derived-bound, per element): with a = sum |products| and e = the kernel's fp32 error before its
// bf16 rounding (rotary: 2^-22 a for its two products and one difference; GEMMs: g(K, 2^-24) a for any summation
// order) plus the reference's own f64 error and what the upstream bound carries, M = halfulp_bf16(|v| + e) + e: the
// kernel's one RNE rounding of a value within e of the exact one. Dims below nope are bytes: M = 0.
// The per-output math is core.hpp (DSA_HD: cpu.cpp and cuda.cu run the same definition).
#pragma once
#include <cstdint>
#include <vector>

#include "stage/stage.hpp"
#include "stages/attn/v4_out/core.hpp"  // the per-output math (DSA_HD), Bug, Dims

namespace dsa::attn::v4_out {

struct Params : dsa::Params {
  std::int64_t T = 0, N = 0, D = 0, rope = 64, G = 8, R = 0, dim = 0;
  std::string tolerance_policy() const override { return "derived-bound"; }
};

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the three loops on the device
#endif
// The reference with `bug`, its three loops on the CPU (OpenMP over tokens).
Expected run(const Case& c, const Params& p, Bug bug, int threads);
inline Dims dims(const Params& p) { return Dims{p.T, p.N, p.D, p.rope, p.G, p.R, p.dim}; }

// Host parts both backends share (cpu.cpp): the reference's tensors, bf16 bits and f64 bounds of o_rot [T, N, D],
// o_lora [T, G, R] and output [T, dim] (filled by the CPU's token loop or by cuda.cu's kernels), the summation
// factors of the GEMMs' bounds, and the packaging of the tensors into the reference.
struct Outputs {
  Tensor rot, rot_m, ua, ua_m, y, y_m;
};
Outputs make_outputs(const Params& p);
// Any-order fp32 summation of K products, g(K, 2^-24), plus the reference's own f64 chain (K 2^-53, with margin).
double gamma_sum(std::int64_t K);
Expected package(const Case& c, const Params& p, Outputs o);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::attn::v4_out
