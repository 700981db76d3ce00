#include "engines/quant/quant_attrs.hpp"

#include "engines/quant/block_quant.hpp"

namespace dsa::quant {

AttrSpec scale_fmt_attr() {
  return str_attr("scale_fmt", "ue8m0", {"ue8m0", "fp32_div", "fp32_mul"},
                  "ue8m0: 2^ceil(log2(max(amax,eps)*fl32(1/448))) (demo, sglang, vLLM); fp32_div: fl32(max(amax,eps)/448) "
                  "(DeepGEMM tests); fp32_mul: fl32(max(amax,eps)*fl32(1/448)) (demo scale_fmt=None)");
}
AttrSpec scale_apply_attr() {
  return str_attr("scale_apply", "div", {"div", "mul_inv"},
                  "div: e4m3(clamp(x/s)) (demo, vLLM); mul_inv: e4m3(clamp(x*fl32(1/s))) (DeepGEMM tests, sglang Triton). "
                  "Identical for ue8m0 scales");
}
AttrSpec amax_eps_attr() { return num_attr("amax_eps", 1e-4, "amax clamp before the scale (demo 1e-4; vLLM fused 1e-10)"); }

QuantParams quant_params(const AttrReader& a, bool clamp) {
  QuantParams p;
  p.fmt = parse_scale_fmt(a.s("scale_fmt"));
  p.apply = parse_scale_apply(a.s("scale_apply"));
  p.amax_eps = static_cast<float>(a.f("amax_eps"));
  p.clamp = clamp;
  return p;
}

}  // namespace dsa::quant
