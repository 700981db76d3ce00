#include "engines/quant/quant_attrs.hpp"

#include <charconv>
#include <limits>
#include <stdexcept>

#include "engines/quant/block_quant.hpp"

namespace dsa::quant {

namespace {

struct Named {
  const char* name;
  ScaleRound round;
  ScaleOp op;
  EpsOn eps_on;
  // Older mla.kcache_store spellings that fix the floor: eps < 0 = the amax_eps attr applies.
  float fixed_eps;
};

// The producers each rule is attributed to: ../shared/specs/v32_indexer_deepgemm_flashmla.md §2.5, §3.4, §6.3 (the
// table of MLA cache writers), v4_compressor_indexer_swa.md §10.
constexpr Named kRules[] = {
    {"ue8m0", ScaleRound::pow2, ScaleOp::mul, EpsOn::amax, -1},
    {"pow2", ScaleRound::pow2, ScaleOp::div, EpsOn::scale, -1},
    {"fp32_div", ScaleRound::fp32, ScaleOp::div, EpsOn::amax, -1},
    {"fp32_mul", ScaleRound::fp32, ScaleOp::mul, EpsOn::amax, -1},
    {"bf16_div", ScaleRound::bf16, ScaleOp::div, EpsOn::amax, -1},
    {"bf16_mul", ScaleRound::bf16, ScaleOp::mul, EpsOn::amax, -1},
    {"amax448", ScaleRound::fp32, ScaleOp::div, EpsOn::amax, 0.0f},
    {"amax448_eps", ScaleRound::fp32, ScaleOp::div, EpsOn::amax, -1},
    {"flt_min", ScaleRound::fp32, ScaleOp::div, EpsOn::scale, std::numeric_limits<float>::min()},
};

const Named* find_rule(const std::string& s) {
  for (const auto& r : kRules)
    if (s == r.name) return &r;
  return nullptr;
}

}  // namespace

const std::vector<std::string>& scale_fmt_names() {
  static const std::vector<std::string> v = [] {
    std::vector<std::string> n;
    for (const auto& r : kRules) n.push_back(r.name);
    return n;
  }();
  return v;
}

AttrSpec scale_fmt_attr(const std::string& def) {
  return str_attr("scale_fmt", def, scale_fmt_names(),
                  "block scale rule (a = amax floored by amax_eps, t = a/448): ue8m0 2^ceil(log2(fl32(a*fl32(1/448)))) "
                  "(DeepSeek demo act_quant, DeepGEMM/sglang/vLLM ue8m0 paths, vLLM MODEL1 cache); pow2 "
                  "2^ceil(log2(max(fl32(amax/448), eps))) (FlashMLA @HEAD tests, vLLM fp8_ds_mla 2026-07+); fp32_div "
                  "fl32(a/448) (DeepGEMM tests, torch on the CPU); fp32_mul fl32(a*fl32(1/448)) (torch `amax / 448.0` on "
                  "CUDA, demo scale_fmt=None); bf16_div / bf16_mul the same rounded to bf16 (a bf16 scale tensor); older "
                  "spellings: amax448 = fp32_div with no floor, amax448_eps = fp32_div, flt_min = fp32_div floored at "
                  "FLT_MIN on the scale");
}
AttrSpec eps_on_attr() {
  return str_attr("eps_on", "rule", {"rule", "amax", "scale"},
                  "where amax_eps floors: amax (max(amax, eps) / 448) or scale (max(amax / 448, eps)); rule: the scale_fmt's "
                  "own (scale for pow2 and flt_min, amax otherwise)");
}
AttrSpec scale_apply_attr() {
  return str_attr("scale_apply", "div", {"div", "mul_inv"},
                  "div: e4m3(clamp(x/s)) (demo, vLLM); mul_inv: e4m3(clamp(x*fl32(1/s))) (DeepGEMM tests, sglang Triton). "
                  "Identical for power-of-two scales");
}
AttrSpec amax_eps_attr() { return num_attr("amax_eps", 1e-4, "the scale rule's floor (demo 1e-4; vLLM fused 1e-10)"); }

ScaleRule scale_rule(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  const std::string fmt = a.s("scale_fmt");
  const Named* n = find_rule(fmt);
  if (!n) throw std::logic_error("scale_fmt '" + fmt + "' passed the schema but names no rule");
  ScaleRule r{n->round, n->op, n->eps_on, 1e-4f};
  if (n->fixed_eps >= 0) {
    r.eps = n->fixed_eps;
    // Files carry every attr's value (defaults included): only a value other than the default contradicts the alias.
    const bool eps_set = a.has("amax_eps") && a.f("amax_eps") != 1e-4;
    const bool on_set = a.has("eps_on") && a.s("eps_on") != "rule";
    for (const char* attr : {"amax_eps", "eps_on"})
      if (attr[0] == 'a' ? eps_set : on_set)
        p.push_back({c.file, c.name, std::string("attr ") + attr,
                     "no " + std::string(attr) + " other than its default with scale_fmt " + fmt + " (it fixes the floor; "
                     "say scale_fmt fp32_div with amax_eps and eps_on instead)",
                     attr_to_string(c.attrs.at(attr))});
    return r;
  }
  check_finite_attr(c, a, "amax_eps", false, p);
  r.eps = static_cast<float>(a.f("amax_eps"));
  const std::string on = a.s("eps_on");
  if (on == "amax") r.eps_on = EpsOn::amax;
  if (on == "scale") r.eps_on = EpsOn::scale;
  return r;
}

QuantParams quant_params(const Case& c, const AttrReader& a, bool clamp, std::vector<Problem>& p) {
  QuantParams q;
  q.scale = scale_rule(c, a, p);
  q.apply = parse_scale_apply(a.s("scale_apply"));
  q.clamp = clamp;
  return q;
}

std::string rule_formula(const ScaleRule& r) {
  char b[32];
  const std::string eps(b, std::to_chars(b, b + sizeof b, r.eps).ptr);
  std::string a = r.eps_on == EpsOn::amax ? "max(amax, " + eps + ")" : "amax";
  std::string t = r.op == ScaleOp::div ? "fl32(" + a + " / 448)" : "fl32(" + a + " * fl32(1/448))";
  if (r.eps_on == EpsOn::scale) t = "max(" + t + ", " + eps + ")";
  return r.round == ScaleRound::pow2 ? "2^ceil(log2(" + t + "))" : r.round == ScaleRound::bf16 ? "bf16(" + t + ")" : t;
}

}  // namespace dsa::quant
