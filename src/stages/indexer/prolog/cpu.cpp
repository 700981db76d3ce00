// indexer.prolog CPU reference: tokens in parallel, each through core.hpp's process_token.
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "stages/indexer/prolog/core.hpp"

namespace dsa::indexer::prolog {

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
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
  const std::int64_t rd = p.rope_dim, half = rd / 2;
  const bool hadamard = p.hadamard;
  // §2.6: softmax_scale = index_head_dim^-0.5 as fp32 (0x3DB504F3 for 128).
  const float sm_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh)));
  std::vector<float> inv_freqs;
  if (!have_table) inv_freqs = yarn_inv_freqs(p.yarn);

  Tensor q_fp8(DType::fp8_e4m3fn, {T, H, Dh}), q_scale(DType::f32, {T, H});
  Tensor k_fp8(DType::fp8_e4m3fn, {T, Dh}), k_scale(DType::f32, {T});
  Tensor weights(DType::f32, {T, H});
  Tensor k_norm(DType::bf16, {T, Dh}), k_rope(DType::bf16, {T, Dh}), k_rot(DType::bf16, {T, Dh});
  Tensor q_rope(DType::bf16, {T, H, Dh}), q_rot(DType::bf16, {T, H, Dh});
  auto u16 = [](Tensor& t, std::int64_t off) { return t.data<std::uint16_t>() + off; };
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
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
    const TokenOut o{q_fp8.data<std::uint8_t>() + t * H * Dh, k_fp8.data<std::uint8_t>() + t * Dh,
                     q_scale.data<float>() + t * H, k_scale.data<float>() + t, weights.data<float>() + t * H,
                     u16(k_norm, t * Dh), u16(k_rope, t * Dh), u16(k_rot, t * Dh), u16(q_rope, t * H * Dh), u16(q_rot, t * H * Dh)};
    process_token(p, H, Dh, k.data<std::uint16_t>() + t * Dh, q.data<std::uint16_t>() + t * H * Dh, w.data<float>() + t * H,
                  lnw.data<float>(), lnb.data<float>(), cs.data(), sn.data(), sm_scale, o);
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

}  // namespace dsa::indexer::prolog
