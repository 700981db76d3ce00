// indexer.prolog's per-token math as DSA_HD functions: the one definition cpu.cpp and cuda.cu both run (contract way
// 3: per token / head one fixed sequence of fp32 operations; LayerNorm statistics in fp64 in index order). Plain
// C++17 without libm (numerics/hd_ops.hpp, half_core.hpp, fp8_core.hpp), so nvcc compiles it for the device.
//   k:       bf16 -> LayerNorm (fp32) -> bf16 k_norm -> RoPE -> bf16 k_rope -> Hadamard -> bf16 k_rot -> act_quant
//   q head:  bf16 -> RoPE -> bf16 q_rope -> Hadamard -> bf16 q_rot -> act_quant; W = fl32(fl32(w * s) * sm_scale)
#pragma once
#include <cstdint>

#include "numerics/half_core.hpp"
#include "numerics/hd.hpp"
#include "engines/quant/block_quant.hpp"
#include "numerics/hadamard.hpp"
#include "numerics/layernorm.hpp"
#include "numerics/rope.hpp"

namespace dsa::indexer::prolog {

// The largest head_dim the stage takes (parse: 32, 64 or 128; one act_quant block per head).
constexpr std::int64_t kMaxHeadDim = 128;

// What the per-token math reads from the attrs (trivially copyable: passed to kernels by value).
struct TokenParams {
  std::int64_t rope_dim = 64;
  num::RopeLayout layout = num::RopeLayout::neox;
  bool hadamard = true;
  float ln_eps = 1e-6f;
  dsa::quant::QuantParams quant;
};

// RoPE (first rope_dim dims; the rest pass through untouched), Hadamard, act_quant of one bf16 vector x[Dh] given as
// exact fp32 values (overwritten). Writes the bf16 intermediates and the codes; returns the scale.
DSA_HD inline float rope_rot_quant(const TokenParams& p, std::int64_t Dh, float* x, const float* cs, const float* sn,
                                   std::uint16_t* rope_out, std::uint16_t* rot_out, std::uint8_t* codes) {
  num::apply_rope_bf16(x, cs, sn, p.rope_dim, p.layout);
  for (std::int64_t i = 0; i < Dh; ++i) rope_out[i] = halfcore::f32_to_bf16(x[i]);
  if (p.hadamard) num::hadamard_bf16(x, Dh);
  for (std::int64_t i = 0; i < Dh; ++i) rot_out[i] = halfcore::f32_to_bf16(x[i]);
  return dsa::quant::quantize_block_hd(x, Dh, p.quant, codes);  // one block of Dh (<= 128) values (§2.4)
}

// The k row of one token: kb[Dh] bf16, LayerNorm weight/bias lw/lb[Dh], this token's RoPE cos/sin[rope_dim/2].
DSA_HD inline void token_k(const TokenParams& p, std::int64_t Dh, const std::uint16_t* kb, const float* lw, const float* lb,
                           const float* cs, const float* sn, std::uint16_t* k_norm, std::uint16_t* k_rope, std::uint16_t* k_rot,
                           std::uint8_t* k_fp8, float* k_scale) {
  if (Dh > kMaxHeadDim) return;  // parse() refuses such shapes
  float v[kMaxHeadDim], y[kMaxHeadDim];
  for (std::int64_t i = 0; i < Dh; ++i) v[i] = halfcore::bf16_to_f32(kb[i]);
  num::layer_norm_f32(v, Dh, lw, lb, p.ln_eps, y);
  for (std::int64_t i = 0; i < Dh; ++i) y[i] = halfcore::round_to_bf16(y[i]);  // .type_as(k)
  for (std::int64_t i = 0; i < Dh; ++i) k_norm[i] = halfcore::f32_to_bf16(y[i]);
  *k_scale = rope_rot_quant(p, Dh, y, cs, sn, k_rope, k_rot, k_fp8);
}

// One q head of one token: qb[Dh] bf16, its gate w; sm_scale = fl32(Dh^-0.5) (§2.6: 0x3DB504F3 for 128).
DSA_HD inline void token_q_head(const TokenParams& p, std::int64_t Dh, const std::uint16_t* qb, float w, const float* cs,
                                const float* sn, float sm_scale, std::uint16_t* q_rope, std::uint16_t* q_rot, std::uint8_t* q_fp8,
                                float* q_scale, float* weight) {
  if (Dh > kMaxHeadDim) return;
  float v[kMaxHeadDim];
  for (std::int64_t i = 0; i < Dh; ++i) v[i] = halfcore::bf16_to_f32(qb[i]);
  const float s = rope_rot_quant(p, Dh, v, cs, sn, q_rope, q_rot, q_fp8);
  *q_scale = s;
  *weight = (w * s) * sm_scale;  // two fp32 roundings, in this order (§2.6)
}

}  // namespace dsa::indexer::prolog
