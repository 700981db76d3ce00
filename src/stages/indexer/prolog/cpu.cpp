// indexer.prolog CPU reference: tokens in parallel, each through core.hpp's token_k / token_q_head (the
// functions the CUDA backend runs); the RoPE rows and the packaging are host code both backends share.
#include <omp.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "stages/indexer/prolog/stage.hpp"

namespace dsa::indexer::prolog {

void rope_rows(const Case& c, const Params& p, std::int64_t T, int threads, std::vector<float>& cs, std::vector<float>& sn) {
  const Tensor* cos_t = c.input_opt("cos");
  const Tensor* sin_t = c.input_opt("sin");
  const Tensor* pos_t = c.input_opt("positions");
  const std::int64_t half = p.rope_dim / 2;
  cs.assign(static_cast<std::size_t>(T * half), 0.0f);
  sn.assign(static_cast<std::size_t>(T * half), 0.0f);
  if (cos_t && sin_t) {
    for (std::int64_t i = 0; i < T * half; ++i) {
      cs[static_cast<std::size_t>(i)] = cos_t->data<float>()[i];
      sn[static_cast<std::size_t>(i)] = sin_t->data<float>()[i];
    }
    return;
  }
  const std::vector<float> inv_freqs = num::yarn_inv_freqs(p.yarn);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (std::int64_t t = 0; t < T; ++t) num::yarn_cos_sin(inv_freqs, pos_t->int_at(t), cs.data() + t * half, sn.data() + t * half);
}

float softmax_scale(std::int64_t Dh) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(Dh))); }

Outputs make_outputs(std::int64_t T, std::int64_t H, std::int64_t Dh) {
  Outputs o;
  o.q_fp8 = Tensor(DType::fp8_e4m3fn, {T, H, Dh});
  o.q_scale = Tensor(DType::f32, {T, H});
  o.k_fp8 = Tensor(DType::fp8_e4m3fn, {T, Dh});
  o.k_scale = Tensor(DType::f32, {T});
  o.weights = Tensor(DType::f32, {T, H});
  o.k_norm = Tensor(DType::bf16, {T, Dh});
  o.k_rope = Tensor(DType::bf16, {T, Dh});
  o.k_rot = Tensor(DType::bf16, {T, Dh});
  o.q_rope = Tensor(DType::bf16, {T, H, Dh});
  o.q_rot = Tensor(DType::bf16, {T, H, Dh});
  return o;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& k = c.input("k");
  const Tensor& w = c.input("w");
  const Tensor& lnw = c.input("ln_weight");
  const Tensor& lnb = c.input("ln_bias");
  const std::int64_t T = q.dim(0), H = q.dim(1), Dh = q.dim(2), half = p.rope_dim / 2;
  const float sm_scale = softmax_scale(Dh);
  std::vector<float> cs, sn;
  rope_rows(c, p, T, opt.thread_count(), cs, sn);
  const TokenParams tp = token_params(p);
  Outputs o = make_outputs(T, H, Dh);
  auto u16 = [](Tensor& t, std::int64_t off) { return t.data<std::uint16_t>() + off; };
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
  for (std::int64_t t = 0; t < T; ++t) {
    const float* ct = cs.data() + t * half;
    const float* st = sn.data() + t * half;
    token_k(tp, Dh, k.data<std::uint16_t>() + t * Dh, lnw.data<float>(), lnb.data<float>(), ct, st, u16(o.k_norm, t * Dh),
            u16(o.k_rope, t * Dh), u16(o.k_rot, t * Dh), o.k_fp8.data<std::uint8_t>() + t * Dh, o.k_scale.data<float>() + t);
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t th = t * H + h;
      token_q_head(tp, Dh, q.data<std::uint16_t>() + th * Dh, w.data<float>()[th], ct, st, sm_scale, u16(o.q_rope, th * Dh),
                   u16(o.q_rot, th * Dh), o.q_fp8.data<std::uint8_t>() + th * Dh, o.q_scale.data<float>() + th,
                   o.weights.data<float>() + th);
    }
  }
  return package(std::move(o), p, H, Dh);
}

Expected package(Outputs o, const Params& p, std::int64_t H, std::int64_t Dh) {
  const std::int64_t rdim = p.rope_dim;
  const bool had = p.hadamard;
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
  add("q_fp8", std::move(o.q_fp8), qdesc);
  add("q_scale", std::move(o.q_scale), thdesc);
  add("k_fp8", std::move(o.k_fp8), kdesc);
  add("k_scale", std::move(o.k_scale), tdesc);
  add("weights", std::move(o.weights), thdesc);
  add("k_norm", std::move(o.k_norm), [Dh](std::int64_t f) { return "token " + std::to_string(f / Dh) + " dim " + std::to_string(f % Dh); });
  add("q_rope", std::move(o.q_rope), qdesc_pre);
  add("k_rope", std::move(o.k_rope), kdesc_pre);
  add("q_rot", std::move(o.q_rot), qdesc);
  add("k_rot", std::move(o.k_rot), kdesc);
  return e;
}

}  // namespace dsa::indexer::prolog
