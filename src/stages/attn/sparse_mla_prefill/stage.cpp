// attn.sparse_mla_prefill: schema, parse, input-structure findings, table entry.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "engines/sparse_attn/structure.hpp"
#include "engines/sparse_attn/softmax_scale.hpp"
#include "stages/attn/sparse_mla_prefill/stage.hpp"
#include "stages/attn/table.hpp"

namespace dsa::attn::sparse_mla_prefill {
namespace {

const char* kName = "attn.sparse_mla_prefill";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.sm_scale = sparse_attn::softmax_scale(c, a, std::nullopt,
                                          "flash_mla_sparse_fwd takes sm_scale without a default: record the value the engine "
                                          "passed (V3.2 serving: the MLA scale 0.1352337788608801)", p);
  r.cv.base2 = a.s("lse_base") == "2";
  r.cv.lonely_lse_pos_inf = !r.cv.base2;
  r.cv.lse_includes_sink = a.b("lse_includes_sink");
  const std::int64_t D = c.input("q").dim(2), K = c.input("indices").dim(2);
  if (D != 576 && D != 512)
    p.push_back({c.file, c.name, "inputs/q", "d_qk = 576 (V3.2: 512 latent + 64 rope) or 512 (FlashMLA @HEAD)", std::to_string(D)});
  if (r.cv.base2 && c.input_opt("attn_sink"))
    p.push_back({c.file, c.name, "inputs/attn_sink", "absent with lse_base = 2 (the 2025 release has no sinks)", "present"});
  check_topk_length(c, K, "row", p);
  // Outputs with their bounds, and per thread the row engine's workspace for the longest row (keys, packed keys and
  // values, 64 heads of scores, q and the head outputs).
  const Tensor& idx = c.input("indices");
  const std::int64_t N = c.input("kv").dim(0);
  const std::int64_t nmax = longest_row(idx, K, [N](std::int64_t t) { return t >= 0 && t < N; });
  const double S = static_cast<double>(c.input("q").dim(0)), H = static_cast<double>(c.input("q").dim(1)), n8 = static_cast<double>(nmax + 8);
  const double thr = static_cast<double>(omp_get_max_threads());
  check_reference_memory(c, S * H * (512.0 * 10 + 26) + thr * (8.0 * n8 * (2.0 * static_cast<double>(D) + 512 + 64) + 8.0 * (H + 4) * (static_cast<double>(D) + 1024)),
                         "inputs/q, inputs/indices", p);
  return r;
}

void sanity(const Case& c, const std::string& tensor, const Tensor&, std::vector<std::string>& f) {
  if (tensor != "out") return;
  const Tensor& idx = c.input("indices");
  const std::int64_t K = idx.dim(2), H = c.input("q").dim(1);
  const auto d = duplicate_rows(idx, K, c.input("kv").dim(0),
                                "flash_mla_sparse_fwd weights such a key once per occurrence (so does the reference).");
  if (!d.empty()) f.push_back(d);
  if (K % 128 != 0)
    f.push_back("topk = " + std::to_string(K) + " is not a multiple of 128: FlashMLA's SM90 sparse prefill rejects it (pad with -1)");
  if (H % 64 != 0)
    f.push_back("h_q = " + std::to_string(H) + " is not a multiple of 64: FlashMLA's SM90 sparse prefill rejects it");
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = kName;
  s.summary = "FlashMLA flash_mla_sparse_fwd: sparse MLA prefill over top-k indices (bf16 kv, out/max_logits/lse)";
  s.spec = "v32 §6.1, §7";
  s.formula = "z_t = sm_scale q[i,h,:] . kv[t,:] over valid indices t; out[i,h,:] = sum_t softmax(z)_t kv[t,:512] (x 1/(1+e^(sink_h - lse))); max_logits = max_t z_t; lse = ln sum_t e^z_t (x log2 e when lse_base 2)";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = sparse_attn::softmax_scale_attrs(
      "softmax scale, required (flash_mla_sparse_fwd has no default; V3.2 serving passes the MLA scale 192^-0.5 * mscale^2 "
      "= 0.1352337788608801)");
  for (auto& x : std::vector<AttrSpec>{
      str_attr("lse_base", "e", {"e", "2"},
               "e: natural max_logits/lse, lonely rows lse +inf (FlashMLA @082094b, 2026+); 2: log2 units, lonely rows lse "
               "-inf (the 2025 V3.2 release @1408756)"),
      bool_attr("lse_includes_sink", false, "public lse = logaddexp(lse, sink) (FlashMLA's lse is sink-exclusive: false)")})
    s.schema.attrs.push_back(x);
  s.schema.inputs = {
      {"q", {D::bf16}, {"s_q,h_q,d_qk"}, false, "queries [q_nope.W_UK (512) | q_pe (64)] (d_qk 576) or 512 dims"},
      {"kv", {D::bf16}, {"s_kv,1,d_qk"}, false, "bf16 latent keys [c (512) | k_pe (64)]; values = the first 512 dims"},
      {"indices", {D::i32, D::i64}, {"s_q,1,topk"}, false, "selected kv rows per query row; invalid = negative or >= s_kv"},
      {"attn_sink", {D::f32}, {"h_q"}, true, "per-head sink logit (FlashMLA @HEAD): out *= 1/(1 + e^(sink - lse))"},
      {"topk_length", {D::i32, D::i64}, {"s_q"}, true, "per row: only the first topk_length indices count (FlashMLA @HEAD)"}};
  s.schema.outputs = {{{"out", {D::bf16}, {"s_q,h_q,512"}, false, "attention output (latent, before W_UV)"}, CompareKind::bounded},
                      {{"max_logits", {D::f32}, {"s_q,h_q"}, false, "max scaled score per row and head"}, CompareKind::bounded},
                      {{"lse", {D::f32}, {"s_q,h_q"}, false, "log-sum-exp of the scaled scores per row and head"}, CompareKind::bounded}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  // Known bugs as values: a failing output is tested against kernels with them (hints, never verdicts).
  s.hypotheses = mla_hypotheses({"out", "lse", "max_logits"}, &locate);
  return s;
}

}  // namespace dsa::attn::sparse_mla_prefill
