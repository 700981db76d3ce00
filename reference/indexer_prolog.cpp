// indexer.prolog — q/k prolog of the lightning indexer (spec v32 §2.1-§2.6), bit-exact given the RoPE table:
//   k: bf16 -> LayerNorm (fp32, reference/layernorm.hpp) -> bf16 k_norm -> RoPE on the first rope_dim dims
//      (fp32, bf16 out) -> Hadamard-128 (fp32 FWHT, bf16 out) -> act_quant -> k_fp8, k_scale
//   q: per head the same without the LayerNorm -> q_fp8, q_scale
//   weights: W[t,h] = fl32(fl32(w[t,h] * q_scale[t,h]) * fl32(Dh^-0.5))     (§2.6)
// Optional intermediate outputs (bf16): k_norm; q_rope/k_rope after RoPE; q_rot/k_rot after RoPE+Hadamard
// (the act_quant input; equal to q_rope/k_rope when hadamard=0), so a user can see which sub-step diverges.
// Parallel over tokens (every token is independent): bit-identical for any thread count.
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "reference/act_quant.hpp"
#include "reference/hadamard.hpp"
#include "reference/layernorm.hpp"
#include "reference/rope.hpp"
#include "reference/v32_indexer.hpp"

namespace dsa::ref {

Expected indexer_prolog(const Case& c, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& k = c.input("k");
  const Tensor& w = c.input("w");
  const Tensor& lnw = c.input("ln_weight");
  const Tensor& lnb = c.input("ln_bias");
  const Tensor* cos_t = c.input_opt("cos");
  const Tensor* sin_t = c.input_opt("sin");
  const Tensor* pos_t = c.input_opt("positions");
  const bool have_table = cos_t && sin_t;

  const std::int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2);
  const std::int64_t rd = c.attr_int("rope_dim", 64), half = rd / 2;
  const RopeLayout layout = parse_rope_layout(c.attr_str("rope_layout", "neox"));
  const bool hadamard = c.attr_bool("hadamard", true);
  const float eps = static_cast<float>(c.attr_float("ln_eps", 1e-6));  // torch casts the double eps to fp32
  QuantParams qp;
  qp.fmt = parse_scale_fmt(c.attr_str("scale_fmt", "ue8m0"));
  qp.apply = parse_scale_apply(c.attr_str("scale_apply", "div"));
  qp.amax_eps = static_cast<float>(c.attr_float("amax_eps", 1e-4));
  qp.clamp = true;  // every producer clamps to ±448 (§2.5)
  // §2.6: softmax_scale = index_head_dim^-0.5 as fp32 (0x3DB504F3 for 128).
  const float sm_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));

  std::vector<float> inv_freqs;
  if (!have_table) {
    YarnParams yp;
    yp.rope_dim = rd;
    yp.theta = c.attr_float("rope_theta", 10000.0);
    yp.factor = c.attr_float("rope_factor", 40.0);
    yp.original_seq_len = c.attr_int("original_seq_len", 4096);
    yp.max_seq_len = c.attr_int("max_seq_len", 16384);
    yp.beta_fast = c.attr_float("beta_fast", 32.0);
    yp.beta_slow = c.attr_float("beta_slow", 1.0);
    inv_freqs = yarn_inv_freqs(yp);
  }

  Tensor q_fp8(DType::fp8_e4m3fn, {T, H, Dh}), q_scale(DType::f32, {T, H});
  Tensor k_fp8(DType::fp8_e4m3fn, {T, Dh}), k_scale(DType::f32, {T});
  Tensor weights(DType::f32, {T, H});
  Tensor k_norm(DType::bf16, {T, Dh}), k_rope(DType::bf16, {T, Dh}), k_rot(DType::bf16, {T, Dh});
  Tensor q_rope(DType::bf16, {T, H, Dh}), q_rot(DType::bf16, {T, H, Dh});

  const std::uint16_t* qb = q.data<std::uint16_t>();
  const std::uint16_t* kb = k.data<std::uint16_t>();
  const float* wv = w.data<float>();
  const float* lw = lnw.data<float>();
  const float* lb = lnb.data<float>();
  const int threads = opt.thread_count();
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t t = 0; t < T; ++t) {
    std::vector<float> cs(static_cast<std::size_t>(half)), sn(static_cast<std::size_t>(half));
    if (have_table) {
      for (std::int64_t i = 0; i < half; ++i) {
        cs[static_cast<std::size_t>(i)] = cos_t->data<float>()[t * half + i];
        sn[static_cast<std::size_t>(i)] = sin_t->data<float>()[t * half + i];
      }
    } else {
      yarn_cos_sin(inv_freqs, pos_t->int_at(t), cs.data(), sn.data());
    }
    std::vector<float> v(static_cast<std::size_t>(Dh)), y(static_cast<std::size_t>(Dh));
    auto store_bf16 = [Dh](Tensor& dst, std::int64_t row, const std::vector<float>& src) {
      std::uint16_t* d = dst.data<std::uint16_t>() + row * Dh;
      for (std::int64_t i = 0; i < Dh; ++i) d[i] = num::f32_to_bf16(src[static_cast<std::size_t>(i)]);
    };
    // Rope (first rope_dim dims; the rest pass through untouched), Hadamard, act_quant of one bf16 vector.
    auto rope_rot_quant = [&](std::vector<float>& x, Tensor& rope_out, Tensor& rot_out, std::int64_t row,
                              std::uint8_t* codes) -> float {
      apply_rope_bf16(x.data(), cs.data(), sn.data(), rd, layout);
      store_bf16(rope_out, row, x);
      if (hadamard) hadamard_bf16(x.data(), Dh);
      store_bf16(rot_out, row, x);
      return quantize_block(x.data(), Dh, qp, codes);  // one block of Dh (<= 128) values (§2.4)
    };

    // k
    for (std::int64_t i = 0; i < Dh; ++i) v[static_cast<std::size_t>(i)] = num::bf16_to_f32(kb[t * Dh + i]);
    layer_norm_f32(v.data(), Dh, lw, lb, eps, y.data());
    for (auto& e : y) e = num::round_to_bf16(e);  // .type_as(k)
    store_bf16(k_norm, t, y);
    k_scale.data<float>()[t] = rope_rot_quant(y, k_rope, k_rot, t, k_fp8.data<std::uint8_t>() + t * Dh);

    // q, per head
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t row = t * H + h;
      for (std::int64_t i = 0; i < Dh; ++i) v[static_cast<std::size_t>(i)] = num::bf16_to_f32(qb[row * Dh + i]);
      const float s = rope_rot_quant(v, q_rope, q_rot, row, q_fp8.data<std::uint8_t>() + row * Dh);
      q_scale.data<float>()[row] = s;
      weights.data<float>()[row] = (wv[row] * s) * sm_scale;  // two fp32 roundings, in this order (§2.6)
    }
  }

  const std::int64_t rdim = rd;
  const bool had = hadamard;
  auto dim_note = [rdim, had](std::int64_t d) -> std::string {
    if (had) return "";
    return d < rdim ? " (rope part)" : " (nope part)";
  };
  auto qdesc = [H, Dh, dim_note](std::int64_t f) {
    const std::int64_t d = f % Dh, th = f / Dh;
    return "token " + std::to_string(th / H) + " head " + std::to_string(th % H) + " dim " + std::to_string(d) + dim_note(d);
  };
  auto kdesc = [Dh, dim_note](std::int64_t f) {
    return "token " + std::to_string(f / Dh) + " dim " + std::to_string(f % Dh) + dim_note(f % Dh);
  };
  auto thdesc = [H](std::int64_t f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
  auto tdesc = [](std::int64_t f) { return "token " + std::to_string(f); };
  // Intermediates before the Hadamard keep the dims' meaning even when hadamard=1.
  auto qdesc_pre = [H, Dh, rdim](std::int64_t f) {
    const std::int64_t d = f % Dh, th = f / Dh;
    return "token " + std::to_string(th / H) + " head " + std::to_string(th % H) + " dim " + std::to_string(d) +
           (d < rdim ? " (rope part)" : " (nope part)");
  };
  auto kdesc_pre = [Dh, rdim](std::int64_t f) {
    const std::int64_t d = f % Dh;
    return "token " + std::to_string(f / Dh) + " dim " + std::to_string(d) + (d < rdim ? " (rope part)" : " (nope part)");
  };

  Expected e;
  auto add = [&e](std::string name, Tensor v, std::function<std::string(std::int64_t)> desc) {
    RefTensor r;
    r.name = std::move(name);
    r.kind = CompareKind::bytes;
    r.value = std::move(v);
    r.describe = std::move(desc);
    e.tensors.push_back(std::move(r));
  };
  add("q_fp8", q_fp8, qdesc);
  add("q_scale", q_scale, thdesc);
  add("k_fp8", k_fp8, kdesc);
  add("k_scale", k_scale, tdesc);
  add("weights", weights, thdesc);
  add("k_norm", k_norm, [Dh](std::int64_t f) { return "token " + std::to_string(f / Dh) + " dim " + std::to_string(f % Dh); });
  add("q_rope", q_rope, qdesc_pre);
  add("k_rope", k_rope, kdesc_pre);
  add("q_rot", q_rot, qdesc);
  add("k_rot", k_rot, kdesc);
  return e;
}

}  // namespace dsa::ref
