// indexer.quant: schema, parse, table entry.
#include "engines/quant/quant_attrs.hpp"
#include "stages/indexer/quant/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::quant {

namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.block_size = a.i("block_size");
  r.q = dsa::quant::quant_params(c, a, a.b("clamp"), p);
  const auto K = c.input("x").dim(1);
  if (r.block_size <= 0 || K % r.block_size != 0)
    p.push_back({c.file, c.name, "attr block_size", "a positive divisor of K = " + std::to_string(K), std::to_string(r.block_size)});
  return r;
}

}  // namespace

Stage stage() {
  Stage s;
  s.name = "indexer.quant";
  s.summary = "act_quant: per 1x128 block fp8 e4m3fn quantization with ue8m0 or fp32 scales";
  s.spec = "v32 §2.5, §3.4, §3.6";
  s.formula = "per row t and block b of block_size values: s[t,b] = scale_fmt rule of amax_b (e.g. ue8m0 2^ceil(log2(amax/448))); y[t,i] = e4m3(clamp(x[t,i] / s[t,b], +-448))";
  s.schema.attrs = {int_attr("block_size", 128, "quantization block along the last dim"), dsa::quant::scale_fmt_attr(), dsa::quant::eps_on_attr(),
                    dsa::quant::scale_apply_attr(), dsa::quant::amax_eps_attr(), bool_attr("clamp", true, "clamp x/s to [-448, 448] before the cast")};
  s.schema.inputs = {{"x", {DType::bf16, DType::f32}, {"T,K"}, false, "activations, rows of K values (K a multiple of block_size)"}};
  s.schema.outputs = {{{"y", {DType::fp8_e4m3fn}, {"T,K"}, false, "fp8 e4m3fn codes"}, CompareKind::bytes},
                      {{"scale", {DType::f32}, {"T,NB"}, false, "fp32 scale per row and block (NB = K / block_size)"}, CompareKind::bytes, true}};
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

}  // namespace dsa::indexer::quant
