// The arithmetic of vLLM's torch logits fallbacks (kernel profile `vllm-torch`, src/profiles/vllm_torch/): the
// per-logit error bound that the indexer logits stages and v4.indexer (kernel vllm-cuda) share, and the fixed-order
// emulation. Plain C++17 over the HD numerics (DSA_HD), so a CUDA kernel can call it unchanged.
//
// SOURCE (vllm-project/vllm, v4 spec §10 "Logits fallback"; checked in source):
//   form ragged_bf16  `fp8_mqa_logits_torch(q, (k, k_scale), w, ks, ke)`: q, k e4m3 cast to bf16 (exact: 4 significant
//     bits); score = einsum("mhd,nd->hmn", q_bf16, k_bf16) — a bf16 GEMM: fp32 accumulation, OUTPUT ROUNDED TO BF16
//     per (head, row, key); .float() * k_scale (fp32 multiply); relu; * weights (fp32 multiply); .sum(dim=0) over the
//     heads in fp32 (torch's reduction order: not specified); -inf outside [ks, ke).
//   form paged_fp32   `fp8_paged_mqa_logits_torch`: NO bf16 rounding. next_n == 1: einsum in fp32 of the raw key codes
//     and q (fp32), relu, * weights, sum over heads, then * the key's fp32 scale; next_n > 1: keys dequantised first
//     (fp32 k * scale), fp32 matmul, relu, * weights, sum over heads; -inf past the row's context.
//
// BOUND (rigorous, any fp32 accumulation order in the dot and in the head sum). Notation: I_h = q_h . k exactly
// (the e4m3 products and their sums are exact in f64: logits_engine.hpp (1)), A_h = sum_d |q_hd k_d| (also exact),
// sc = the key scale (>= 0: a quantizer's amax / 448 or a power of two), w_h the fp32 weight, u = 2^-24 (fp32),
// ub = 2^-8 (bf16), gamma(n, v) = n v / (1 - n v).
//   (a) the fp32 dot: |d_h - I_h| <= g_dot A_h with g_dot = gamma(D + 1, 2^-22). Each step of any order adds at most
//       2^-23 of a partial sum bounded by A_h (IEEE RNE gives 2^-24; tensor-core accumulation that aligns a group of
//       products to its largest exponent and truncates gives at most 2^-23 per group member), and the extra term covers
//       the next_n > 1 dequantisation fl(k sc) (2^-24 A_h |sc|).
//   (b) form ragged_bf16 only: |bf16(d_h) - d_h| <= ub |d_h| <= ub (|I_h| + g_dot A_h). So the head score is within
//       e_h = g_dot A_h + [ub (|I_h| + g_dot A_h)] of I_h.
//   (c) the multiply by sc: t_h = fl(s_h sc), |t_h - sc I_h| <= e1_h = sc (e_h + u (|I_h| + e_h)) + 2^-149 (an fp32
//       underflow costs at most half the smallest subnormal). relu is 1-Lipschitz, so with r_h = sc relu(I_h) + e1_h:
//       |relu(t_h) - sc relu(I_h)| <= e1_h and relu(t_h) <= r_h (sc >= 0: relu(sc I) = sc relu(I)).
//   (d) the multiply by w_h: |p_h - w_h relu(t_h)| <= u |w_h| r_h + 2^-149, |p_h| <= |w_h| r_h (1 + u) + 2^-149.
//   (e) the fp32 head sum in ANY order: |S - sum p_h| <= gamma(H - 1, u) sum |p_h|.
//   (f) form paged_fp32 next_n == 1 scales after the sum instead of per head: one more rounding, u (1 + gamma) sum |p_h|
//       (the per-head multiply of (c) is then absent, so (c) over-covers it).
//   Total, with mag = sum_h (|w_h| r_h (1 + u) + 2^-149) and err = sum_h (|w_h| e1_h + u |w_h| r_h + 2^-149):
//       |S - sc sum_h w_h relu(I_h)| <= B = err + (gamma(H - 1, u) + u (1 + gamma(H - 1, u))) mag.
//   The bound is evaluated in f64 (a few dozen operations on positive terms: relative error < 2^-45) and returned
//   times (1 + 2^-20). The stages add the reference's own rounding of the exact value (fp32: u mag >= u |V|; bf16
//   output: ub |S| + ub |V| <= ub (2 mag + B)), see torch_output_bound.
//
// EMULATION (one fixed order; bit-exact BITEXACT verdicts, never required: torch's GEMM and head-sum orders are not
// fixed): the dot in fp32, d = 0..D-1 in turn from +0 (the e4m3 products are exact in fp32); form ragged_bf16 rounds
// it to bf16 (RNE) and multiplies by sc in fp32, relu (NaN kept), times w_h in fp32, summed over h = 0..H-1 in turn
// from +0 in fp32; form paged_fp32: relu of the fp32 dot, times w_h, the same head sum, then times sc (the next_n == 1
// path). The logit rounded to bf16 (RNE) for bf16 logits.
#pragma once
#include <cstdint>

#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::engines::logits::torch_core {

using i64 = std::int64_t;

enum class Form : std::uint8_t { ragged_bf16, paged_fp32 };

DSA_HD inline double gamma(i64 n, double u) {
  return n <= 0 ? 0.0 : static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

struct Consts {
  Form form = Form::ragged_bf16;
  double g_dot = 0;   // gamma(D + 1, 2^-22)
  double g_head = 0;  // gamma(H - 1, 2^-24)
};
DSA_HD inline Consts consts(Form f, i64 H, i64 D) { return {f, gamma(D + 1, 0x1p-22), gamma(H - 1, 0x1p-24)}; }

// (a)+(b): the bound e_h on |head score - I_h| before the scale.
DSA_HD inline double head_err(double I, double A, const Consts& k) {
  const double e = k.g_dot * A;
  return k.form == Form::ragged_bf16 ? e + 0x1p-8 * (hd::abs(I) + e) : e;
}

struct Acc {
  double err = 0, mag = 0;
};
// (c)+(d): head h with exact dot I, A = sum |products|, weight w, key scale sc.
DSA_HD inline void head(Acc& a, double I, double A, double w, double sc, const Consts& k) {
  const double e = head_err(I, A, k), as = hd::abs(sc), aw = hd::abs(w);
  const double e1 = as * (e + 0x1p-24 * (hd::abs(I) + e)) + 0x1p-149;
  const double r = as * (I > 0.0 ? I : 0.0) + e1;
  a.err += aw * e1 + 0x1p-24 * aw * r + 0x1p-149;
  a.mag += aw * r * (1.0 + 0x1p-24) + 0x1p-149;
}
// (e)+(f): the bound B on |S - V|, V = sc sum_h w_h relu(I_h) (0 for non-finite operands: the value decides).
DSA_HD inline double finish(const Acc& a, const Consts& k) {
  const double b = a.err + (k.g_head + 0x1p-24 * (1.0 + k.g_head)) * a.mag;
  return hd::is_finite(b) ? b * (1.0 + 0x1p-20) : 0.0;
}
// What a stage compares: B plus the reference's own rounding of V (fp32: u mag; bf16 logits: ub (2 mag + B)).
DSA_HD inline double output_bound(double B, double mag, bool bf16) {
  if (!hd::is_finite(B) || !hd::is_finite(mag)) return 0.0;
  return bf16 ? B + 0x1p-8 * (2.0 * mag + B) * (1.0 + 0x1p-20) : B + 0x1p-24 * mag * (1.0 + 0x1p-20);
}

// ---- emulation ---------------------------------------------------------------------------------------------------
// The fp32 dot of decoded codes, d ascending from +0.
DSA_HD inline float dot32(const float* q, const float* k, i64 D) {
  float s = 0.0f;
  for (i64 d = 0; d < D; ++d) s += q[d] * k[d];
  return s;
}
DSA_HD inline float relu32(float x) { return x < 0.0f ? 0.0f : x; }  // NaN kept
// One head's term: ragged_bf16 fl(relu(fl(bf16(d) sc)) w); paged_fp32 fl(relu(d) w).
DSA_HD inline float head_term(float d, float w, float sc, Form f) {
  if (f == Form::ragged_bf16) return relu32(halfcore::round_to_bf16(d) * sc) * w;
  return relu32(d) * w;
}
// The logit from the running head sum S (heads 0..H-1 in turn from +0): paged_fp32 multiplies by sc last.
DSA_HD inline float finish32(float S, float sc, Form f) { return f == Form::paged_fp32 ? S * sc : S; }

}  // namespace dsa::engines::logits::torch_core
