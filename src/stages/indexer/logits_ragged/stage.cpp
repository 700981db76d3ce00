// indexer.logits_ragged: schema, parse, table entry.
#include "stages/indexer/common/attrs.hpp"
#include "stages/indexer/common/logits_engine.hpp"
#include "stages/indexer/logits_ragged/core.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::logits_ragged {
namespace {

const char* kName = "indexer.logits_ragged";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.clean_logits = a.b("clean_logits");
  r.max_seqlen_k = a.i("max_seqlen_k");
  r.bf16 = a.s("logits_dtype") == "bf16";
  check_logits_heads(c, "inputs/q", c.input("q").dim(1), c.input("q").dim(2), p);
  const auto N = c.input("kv").dim(0);
  const auto msk = r.max_seqlen_k;
  if (msk < 0) p.push_back({c.file, c.name, "attr max_seqlen_k", ">= 0", std::to_string(msk)});
  if (msk > 0 && r.clean_logits)
    p.push_back({c.file, c.name, "attr clean_logits", "0 when max_seqlen_k > 0 (DeepGEMM requires it)", "1"});
  const Tensor& ks = c.input("ks");
  const Tensor& ke = c.input("ke");
  for (std::int64_t i = 0; i < ks.numel(); ++i) {
    const auto lo = ks.data<std::int32_t>()[i], hi = ke.data<std::int32_t>()[i];
    if (lo < 0 || hi < lo || hi > N) {
      p.push_back({c.file, c.name, "inputs/ks, inputs/ke", "0 <= ks <= ke <= N = " + std::to_string(N),
                   "row " + std::to_string(i) + ": ks=" + std::to_string(lo) + " ke=" + std::to_string(hi)});
      break;
    }
    // Compressed logits hold max_seqlen_k columns: a wider row would be cut (DeepGEMM writes past the row).
    if (msk > 0 && hi - lo > msk) {
      p.push_back({c.file, c.name, "attr max_seqlen_k", ">= every row's ke - ks (row " + std::to_string(i) + ": " + std::to_string(hi - lo) + ")",
                   std::to_string(msk)});
      break;
    }
  }
  for (const auto* g : {&c.outputs, &c.expected}) {
    auto it = g->find("logits");
    if (it == g->end()) continue;
    const auto want = msk > 0 ? msk : N;
    if (it->second.dim(1) != want)
      p.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs" : "expected") + "/logits",
                   "dim 1 = " + std::string(msk > 0 ? "max_seqlen_k" : "N") + " = " + std::to_string(want),
                   std::to_string(it->second.dim(1))});
  }
  return r;
}

// Known bugs as values: logit f = (row i, column col -> key j).
std::optional<logits::LogitOperands> operands(const Case& c, const Params& p, std::int64_t f) {
  const Tensor &q = c.input("q"), &kv = c.input("kv");
  const Rows rows{c.input("ks").data<std::int32_t>(), c.input("ke").data<std::int32_t>(), kv.dim(0), p.max_seqlen_k};
  const std::int64_t i = f / rows.cols(), col = f % rows.cols(), H = q.dim(1), D = q.dim(2);
  const std::int64_t j = p.max_seqlen_k > 0 ? rows.lo(i) + col : col;
  if (j < rows.lo(i) || j >= rows.hi(i)) return std::nullopt;
  return logits::LogitOperands{q.data<std::uint8_t>() + i * H * D, c.input("weights").data<float>() + i * H,
                               kv.data<std::uint8_t>() + j * D, c.input("kv_scale").data<float>()[j], H, D};
}

}  // namespace

Stage stage() {
  using D = DType;
  const std::vector<DType> kFP8{D::fp8_e4m3fn}, kF32{D::f32};
  Stage s;
  s.name = kName;
  s.summary = "DeepGEMM fp8_mqa_logits: ragged prefill MQA logits over [ks, ke) per query row";
  s.spec = "v32 §3.2, §3.5";
  s.pipeline_order = 40;
  s.default_tolerance = "sm90-fp8";
  s.schema.attrs = {bool_attr("clean_logits", true, "columns outside [ks, ke) are -inf (true) or undefined (false)"),
                    int_attr("max_seqlen_k", 0, "> 0: compressed logits [S, max_seqlen_k], column t = key ks+t"),
                    logits_dtype_attr(), kernel_attr(kName)};
  s.schema.inputs = {{"q", kFP8, {"S,H,Dh"}, false, "fp8 queries (q scale folded into weights)"},
                     {"kv", kFP8, {"N,Dh"}, false, "fp8 keys"},
                     {"kv_scale", kF32, {"N"}, false, "per-key fp32 scale"},
                     {"weights", kF32, {"S,H"}, false, "head gates W"},
                     {"ks", {D::i32}, {"S"}, false, "cu_seq_len_k_start: first valid key per row"},
                     {"ke", {D::i32}, {"S"}, false, "cu_seq_len_k_end: one past the last valid key per row"}};
  s.schema.outputs = {{{"logits", {D::f32, D::bf16}, {"S,?"}, false, "logits [S, N] (or [S, max_seqlen_k])"}, CompareKind::bounded, false, true}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  s.hypotheses = logits::logit_hypotheses<Params>(&operands);
  s.tiling = RowTiling{"logits", [](const Case&, const dsa::Params&) { return std::int64_t{1}; }};
  return s;
}

}  // namespace dsa::indexer::logits_ragged
