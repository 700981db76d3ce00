// indexer.prolog: schema, parse, table entry.
#include "engines/quant/quant_attrs.hpp"
#include "stages/indexer/attrs.hpp"
#include "stages/indexer/prolog/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::prolog {

namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.rope_dim = a.i("rope_dim");
  r.layout = num::parse_rope_layout(a.s("rope_layout"));
  r.hadamard = a.b("hadamard");
  r.ln_eps = static_cast<float>(a.f("ln_eps"));
  r.quant = dsa::quant::quant_params(c, a, true, p);
  r.yarn.rope_dim = r.rope_dim;
  r.yarn.theta = a.f("rope_theta");
  r.yarn.factor = a.f("rope_factor");
  r.yarn.original_seq_len = a.i("original_seq_len");
  r.yarn.max_seq_len = a.i("max_seq_len");
  r.yarn.beta_fast = a.f("beta_fast");
  r.yarn.beta_slow = a.f("beta_slow");

  check_finite_attr(c, a, "ln_eps", false, p);
  for (const char* n : {"rope_theta", "rope_factor", "beta_fast", "beta_slow"}) check_finite_attr(c, a, n, true, p);
  if (const Tensor* pos = c.input_opt("positions"); pos && !(c.input_opt("cos") && c.input_opt("sin")))
    for (std::int64_t t = 0; t < pos->numel(); ++t)
      if (pos->int_at(t) < 0 || pos->int_at(t) >= (std::int64_t{1} << 31)) {
        p.push_back({c.file, c.name, "inputs/positions", "positions in [0, 2^31)", "token " + std::to_string(t) + ": " + std::to_string(pos->int_at(t))});
        break;
      }
  const bool has_cs = c.input_opt("cos") && c.input_opt("sin");
  if (!has_cs && !c.input_opt("positions"))
    p.push_back({c.file, c.name, "inputs/cos, inputs/sin or inputs/positions", "a RoPE table (cos+sin) or positions", "neither"});
  if ((c.input_opt("cos") != nullptr) != (c.input_opt("sin") != nullptr))
    p.push_back({c.file, c.name, c.input_opt("cos") ? "inputs/sin" : "inputs/cos", "cos and sin together", "only one of them"});
  const auto rd = r.rope_dim;
  const auto Dh = c.input("k").dim(1);
  if (rd <= 0 || rd % 2 != 0 || rd > Dh)
    p.push_back({c.file, c.name, "attr rope_dim", "an even number in [2, " + std::to_string(Dh) + "]", std::to_string(rd)});
  if (const Tensor* cs = c.input_opt("cos"); cs && cs->dim(1) * 2 != rd)
    p.push_back({c.file, c.name, "inputs/cos", "dim 1 = rope_dim/2 = " + std::to_string(rd / 2), std::to_string(cs->dim(1))});
  if (r.hadamard && Dh != 128) p.push_back({c.file, c.name, "inputs/k", "head_dim 128 when hadamard=1", std::to_string(Dh)});
  if (Dh != 128 && Dh != 64 && Dh != 32)  // one act_quant block per head: q_scale is [T,H]
    p.push_back({c.file, c.name, "inputs/k", "head_dim 32, 64 or 128 (one quantization block per head)", std::to_string(Dh)});
  return r;
}

}  // namespace

Stage stage() {
  using D = DType;
  const std::vector<DType> kF32{D::f32}, kFP8{D::fp8_e4m3fn};
  Stage s;
  s.name = "indexer.prolog";
  s.summary = "q/k prolog: k LayerNorm, RoPE (NeoX|interleaved), Hadamard-128, act_quant, head-gate weights";
  s.spec = "v32 §2.1-§2.6";
  s.formula = "k_rot = Hadamard128(RoPE(bf16(LayerNorm(k)))), q_rot = Hadamard128(RoPE(q)) (bf16 steps); (k_fp8, k_scale), (q_fp8, q_scale) = act_quant; weights[t,h] = fl32(fl32(w[t,h] q_scale[t,h]) fl32(Dh^-0.5))";
  s.schema.attrs = {
      str_attr("rope_layout", "neox", {"neox", "interleaved"}, "indexer RoPE pairing: neox (x[i], x[i+rope_dim/2]) or interleaved (x[2i], x[2i+1])"),
      int_attr("rope_dim", 64, "leading dims of each head that are rotated"),
      bool_attr("hadamard", true, "apply rotate_activation (Hadamard-128, scale 128^-0.5); vLLM and fused sglang skip it"),
      num_attr("ln_eps", 1e-6, "k LayerNorm epsilon"),
      dsa::quant::scale_fmt_attr(), dsa::quant::eps_on_attr(), dsa::quant::scale_apply_attr(), dsa::quant::amax_eps_attr(),
      num_attr("rope_theta", 10000.0, "RoPE base (computed tables only)"),
      num_attr("rope_factor", 40.0, "YaRN factor (computed tables only)"),
      int_attr("original_seq_len", 4096, "YaRN original context (computed tables only)"),
      int_attr("max_seq_len", 16384, "YaRN active when > original_seq_len (computed tables only)"),
      num_attr("beta_fast", 32.0, "YaRN beta_fast"), num_attr("beta_slow", 1.0, "YaRN beta_slow")};
  s.schema.inputs = {
      {"q", {D::bf16}, {"T,H,Dh"}, false, "q after wq_b, bf16 [tokens, heads, head_dim]"},
      {"k", {D::bf16}, {"T,Dh"}, false, "k after wk, bf16 [tokens, head_dim]"},
      {"w", kF32, {"T,H"}, false, "head gates weights_proj(x)*n_heads^-0.5, fp32"},
      {"ln_weight", kF32, {"Dh"}, false, "k_norm LayerNorm weight (fp32)"},
      {"ln_bias", kF32, {"Dh"}, false, "k_norm LayerNorm bias (fp32)"},
      {"cos", kF32, {"T,R2"}, true, "RoPE cos table per token (R2 = rope_dim/2); preferred for bit-exactness"},
      {"sin", kF32, {"T,R2"}, true, "RoPE sin table per token"},
      {"positions", {D::i32, D::i64}, {"T"}, true, "token positions (used when cos/sin are not given: YaRN tables computed)"}};
  s.schema.outputs = {
      {{"q_fp8", kFP8, {"T,H,Dh"}, false, "quantized q"}, CompareKind::bytes},
      {{"q_scale", kF32, {"T,H"}, false, "q scale per head"}, CompareKind::bytes, true},
      {{"k_fp8", kFP8, {"T,Dh"}, false, "quantized k"}, CompareKind::bytes},
      {{"k_scale", kF32, {"T"}, false, "k scale per token"}, CompareKind::bytes, true},
      {{"weights", kF32, {"T,H"}, false, "W = fl32(fl32(w*q_scale)*fl32(Dh^-0.5)) (128^-0.5 for V3.2)"}, CompareKind::bytes},
      // Optional intermediates (bf16), to locate the diverging sub-step.
      {{"k_norm", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm (bf16)"}, CompareKind::bytes},
      {{"q_rope", {D::bf16}, {"T,H,Dh"}, true, "q after RoPE (bf16, nope dims unchanged)"}, CompareKind::bytes},
      {{"k_rope", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm and RoPE (bf16)"}, CompareKind::bytes},
      {{"q_rot", {D::bf16}, {"T,H,Dh"}, true, "q after RoPE and Hadamard = the act_quant input (bf16)"}, CompareKind::bytes},
      {{"k_rot", {D::bf16}, {"T,Dh"}, true, "k after LayerNorm, RoPE and Hadamard = the act_quant input (bf16)"}, CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::indexer::prolog
