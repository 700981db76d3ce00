// indexer.prolog — q/k prolog of the lightning indexer (spec v32 §2.1-§2.6), bit-exact given the RoPE table:
//   k: bf16 -> LayerNorm (fp32, common/layernorm.hpp) -> bf16 k_norm -> RoPE on the first rope_dim dims
//      (fp32, bf16 out) -> Hadamard-128 (fp32 FWHT, bf16 out) -> act_quant -> k_fp8, k_scale
//   q: per head the same without the LayerNorm -> q_fp8, q_scale
//   weights: W[t,h] = fl32(fl32(w[t,h] * q_scale[t,h]) * fl32(Dh^-0.5))     (§2.6)
// Optional intermediate outputs (bf16): k_norm; q_rope/k_rope after RoPE; q_rot/k_rot after RoPE+Hadamard
// (the act_quant input; equal to q_rope/k_rope when hadamard=0), so a user can see which sub-step diverges.
// Every token is independent (contract way 3: one fixed order per token): bit-identical for any thread count.
#pragma once
#include <cmath>
#include <vector>

#include "numerics/formats.hpp"
#include "stage/stage.hpp"
#include "stages/indexer/common/act_quant.hpp"
#include "stages/indexer/common/hadamard.hpp"
#include "stages/indexer/common/layernorm.hpp"
#include "stages/indexer/common/rope.hpp"

namespace dsa::indexer::prolog {

struct Params : dsa::Params {
  std::int64_t rope_dim = 64;
  RopeLayout layout = RopeLayout::neox;
  bool hadamard = true;
  float ln_eps = 1e-6f;  // torch casts the double eps to fp32
  QuantParams quant;     // clamp always on: every producer clamps to ±448 (§2.5)
  YarnParams yarn;       // computed tables (no cos/sin inputs)
};

// Where one token's results go (rows of the output tensors; bf16 intermediates as raw bits).
struct TokenOut {
  std::uint8_t *q_fp8, *k_fp8;
  float *q_scale, *k_scale, *weights;
  std::uint16_t *k_norm, *k_rope, *k_rot, *q_rope, *q_rot;
};

// One token: k row kb[Dh], q rows qb[H*Dh], gates w[H], LayerNorm lw/lb, RoPE cos/sin of this token's position.
// sm_scale = fl32(Dh^-0.5) (§2.6: 0x3DB504F3 for 128).
inline void process_token(const Params& p, std::int64_t H, std::int64_t Dh, const std::uint16_t* kb, const std::uint16_t* qb,
                          const float* w, const float* lw, const float* lb, const float* cs, const float* sn, float sm_scale,
                          const TokenOut& o) {
  std::vector<float> v(static_cast<std::size_t>(Dh)), y(static_cast<std::size_t>(Dh));
  auto store_bf16 = [Dh](std::uint16_t* d, const std::vector<float>& src) {
    for (std::int64_t i = 0; i < Dh; ++i) d[i] = num::f32_to_bf16(src[static_cast<std::size_t>(i)]);
  };
  // RoPE (first rope_dim dims; the rest pass through untouched), Hadamard, act_quant of one bf16 vector.
  auto rope_rot_quant = [&](std::vector<float>& x, std::uint16_t* rope_out, std::uint16_t* rot_out, std::uint8_t* codes) {
    apply_rope_bf16(x.data(), cs, sn, p.rope_dim, p.layout);
    store_bf16(rope_out, x);
    if (p.hadamard) hadamard_bf16(x.data(), Dh);
    store_bf16(rot_out, x);
    return quantize_block(x.data(), Dh, p.quant, codes);  // one block of Dh (<= 128) values (§2.4)
  };
  // k
  for (std::int64_t i = 0; i < Dh; ++i) v[static_cast<std::size_t>(i)] = num::bf16_to_f32(kb[i]);
  layer_norm_f32(v.data(), Dh, lw, lb, p.ln_eps, y.data());
  for (auto& e : y) e = num::round_to_bf16(e);  // .type_as(k)
  store_bf16(o.k_norm, y);
  *o.k_scale = rope_rot_quant(y, o.k_rope, o.k_rot, o.k_fp8);
  // q, per head
  for (std::int64_t h = 0; h < H; ++h) {
    for (std::int64_t i = 0; i < Dh; ++i) v[static_cast<std::size_t>(i)] = num::bf16_to_f32(qb[h * Dh + i]);
    const float s = rope_rot_quant(v, o.q_rope + h * Dh, o.q_rot + h * Dh, o.q_fp8 + h * Dh);
    o.q_scale[h] = s;
    o.weights[h] = (w[h] * s) * sm_scale;  // two fp32 roundings, in this order (§2.6)
  }
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::prolog
