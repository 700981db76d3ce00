#include "stages/indexer/attrs.hpp"

#include <cmath>

#include "layouts/indexer_kcache.hpp"

namespace dsa::indexer {

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
AttrSpec logits_dtype_attr() {
  return str_attr("logits_dtype", "float32", {"float32", "bf16"}, "dtype of the logits output (DeepGEMM @HEAD logits_dtype)");
}
AttrSpec page_size_attr() { return int_attr("page_size", 64, "tokens per page"); }
AttrSpec kcache_layout_attr() {
  return str_attr("layout", layouts::IndexerKCache::kName, layouts::indexer_kcache_names(),
                  "byte layout of the indexer K cache: indexer_kcache_planar (DeepGEMM, sglang/vLLM CUDA), aiter_rowmajor_p1 "
                  "(ROCm aiter legacy, page_size 1), aiter_preshuffle (ROCm aiter MFMA 16x16 tiles, page_size % 16 == 0)");
}

dsa::quant::QuantParams quant_params(const AttrReader& a, bool clamp) {
  dsa::quant::QuantParams p;
  p.fmt = dsa::quant::parse_scale_fmt(a.s("scale_fmt"));
  p.apply = dsa::quant::parse_scale_apply(a.s("scale_apply"));
  p.amax_eps = static_cast<float>(a.f("amax_eps"));
  p.clamp = clamp;
  return p;
}

void check_finite_attr(const Case& c, const AttrReader& a, const std::string& name, bool positive, std::vector<Problem>& p) {
  const double v = a.f(name);
  if (!std::isfinite(v) || v < 0.0 || (positive && v == 0.0))
    p.push_back({c.file, c.name, "attr " + name, positive ? "a finite number > 0" : "a finite number >= 0", attr_to_string(AttrValue{v})});
}

void check_logits_heads(const Case& c, const std::string& tensor, std::int64_t H, std::int64_t Dh, std::vector<Problem>& p) {
  if (Dh != 32 && Dh != 64 && Dh != 128) p.push_back({c.file, c.name, tensor, "head_dim 32, 64 or 128", std::to_string(Dh)});
  if (H <= 0 || H % 8 != 0)
    p.push_back({c.file, c.name, tensor, "heads H a positive multiple of 8 (DeepGEMM head reduction)", std::to_string(H)});
}

}  // namespace dsa::indexer
