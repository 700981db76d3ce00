// indexer.fused: schema, parse (the logits part validated as the indexer.logits_paged case it is), table entry.
#include "profiles/profile.hpp"
#include "layouts/layouts.hpp"
#include "stages/indexer/attrs.hpp"
#include "stages/indexer/fused/stage.hpp"
#include "stages/indexer/logits_paged/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::fused {
namespace {

const char* kName = "indexer.fused";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.k = a.i("k");
  r.sorted = a.b("sorted");
  r.fast_path = a.b("fast_path");
  if (r.k <= 0) p.push_back({c.file, c.name, "attr k", "> 0", std::to_string(r.k)});
  if (a.profile() && a.profile()->emulates("indexer.logits_paged")) r.logits_profile = a.profile();
  r.band_policy = a.s("logits_dtype") == "bf16" ? "bf16-logits" : "sm90-fp8";
  // The logits never exist in the file: the reference's logits, M, mask, scores and bounds must fit the budget.
  const std::int64_t R = c.input("q").dim(0) * c.input("q").dim(1), cols = a.i("max_context_len");
  if (!check_reference_memory(c, static_cast<double>(R) * static_cast<double>(std::max<std::int64_t>(cols, 0)) * 37.0, "attr max_context_len", p))
    return r;
  auto lc = std::make_shared<Case>(logits_case(c));
  apply_attr_defaults(*lc);
  for (const Problem& q : validate_case(*lc, false)) p.push_back(q);  // same file, case and tensor names
  r.logits_case = std::move(lc);
  return r;
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = kName;
  s.summary = "fused indexer: paged fp8 MQA logits + top-k in one kernel (logits never materialised), judged against exact logits";
  s.spec = "v32 §3.3-§3.5, §5";
  s.formula = "indices[r, :] = topk_p logits(r, p), logits as indexer.logits_paged (never materialised): kv_scale[p] * sum_h W[r,h] relu(q[r,h,:] . k[p])";
  s.schema.attrs = {int_attr("k", 2048, "top-k width"),
                    bool_attr("sorted", false, "output in descending score order"),
                    bool_attr("fast_path", true, "rows with n <= k emit [0..n-1] then -1 regardless of scores"),
                    required_int_attr("max_context_len", "key positions per row the kernel may select from (logits width)"),
                    layouts::page_size_attr(), kcache_layout_attr(),
                    logits_dtype_attr()};  // + attr kernel (added by the table): a profile emulating the logits gives an exact band on its logits
  s.schema.inputs = logits_paged::input_schema();  // the inputs of fp8_paged_mqa_logits
  s.schema.outputs = {{{"indices", {D::i32, D::i64}, {"B*next_n,?"}, false, "selected key positions, -1 padded"}, CompareKind::topk_set}};
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

}  // namespace dsa::indexer::fused
