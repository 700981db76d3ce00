// indexer.prolog — q/k prolog of the lightning indexer (spec v32 §2.1-§2.6), bit-exact given the RoPE table:
//   k: bf16 -> LayerNorm (fp32, numerics/layernorm.hpp) -> bf16 k_norm -> RoPE on the first rope_dim dims
//      (fp32, bf16 out) -> Hadamard-128 (fp32 FWHT, bf16 out) -> act_quant -> k_fp8, k_scale
//   q: per head the same without the LayerNorm -> q_fp8, q_scale
//   weights: W[t,h] = fl32(fl32(w[t,h] * q_scale[t,h]) * fl32(Dh^-0.5))     (§2.6)
// Optional intermediate outputs (bf16): k_norm; q_rope/k_rope after RoPE; q_rot/k_rot after RoPE+Hadamard
// (the act_quant input; equal to q_rope/k_rope when hadamard=0), so a user can see which sub-step diverges.
// Every token is independent (contract way 3: one fixed order per token): bit-identical for any thread count.
// The per-token math is core.hpp (DSA_HD: cpu.cpp and cuda.cu run the same definition).
#pragma once
#include <cmath>
#include <vector>

#include "numerics/formats.hpp"
#include "stage/stage.hpp"
#include "engines/quant/block_quant.hpp"
#include "numerics/rope.hpp"
#include "stages/indexer/prolog/core.hpp"

namespace dsa::indexer::prolog {

struct Params : dsa::Params {
  std::int64_t rope_dim = 64;
  num::RopeLayout layout = num::RopeLayout::neox;
  bool hadamard = true;
  float ln_eps = 1e-6f;  // torch casts the double eps to fp32
  dsa::quant::QuantParams quant;     // clamp always on: every producer clamps to ±448 (§2.5)
  num::YarnParams yarn;       // computed tables (no cos/sin inputs)
};

// The per-token math (core.hpp) reads these.
inline TokenParams token_params(const Params& p) { return TokenParams{p.rope_dim, p.layout, p.hadamard, p.ln_eps, p.quant}; }

// Host parts both backends share (cpu.cpp): each token's RoPE cos/sin rows [T, rope_dim/2] (the dumped table, or the
// YaRN table at the token's position), and the packaging of the output tensors into the reference.
void rope_rows(const Case& c, const Params& p, std::int64_t T, int threads, std::vector<float>& cs, std::vector<float>& sn);
struct Outputs {
  Tensor q_fp8, q_scale, k_fp8, k_scale, weights, k_norm, k_rope, k_rot, q_rope, q_rot;
};
Outputs make_outputs(std::int64_t T, std::int64_t H, std::int64_t Dh);
Expected package(Outputs o, const Params& p, std::int64_t H, std::int64_t Dh);
// §2.6: softmax_scale = index_head_dim^-0.5 as fp32 (0x3DB504F3 for 128).
float softmax_scale(std::int64_t Dh);

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the tokens on the GPU
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::prolog
