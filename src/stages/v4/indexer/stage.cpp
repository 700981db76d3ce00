// v4.indexer: schema (npu_vllm_quant_lightning_indexer's argument names), parse, table entry.
#include <algorithm>
#include <string>

#include "profiles/profiles.hpp"
#include "stages/v4/indexer/stage.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::indexer {
namespace {

const char* kName = "v4.indexer";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  namespace li = dsa::engines::ascend_li;
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  li::Geometry& g = p.g;
  p.k = a.i("sparse_count");
  g.cmp_ratio = a.i("cmp_ratio");
  p.variant = a.profile() == &profiles::vllm_cuda() ? Variant::vllm_cuda : a.profile() == &profiles::ref() ? Variant::ref_bf16 : Variant::ascend_a3;
  const std::string v = a.profile() ? a.profile()->name : "ascend-a3";
  p.sorted = a.i("sorted") != 0;
  // The variant's operand dtypes (one schema for the three).
  struct Want {
    const char* tensor;
    std::vector<DType> dt;  // empty: must be absent
  };
  using DT = DType;
  const std::vector<Want> want =
      p.variant == Variant::ascend_a3
          ? std::vector<Want>{{"query", {DT::int8}}, {"key", {DT::int8}}, {"weights", {DT::fp16}}, {"query_dequant_scale", {DT::fp16}}, {"key_dequant_scale", {DT::fp16}}}
      : p.variant == Variant::vllm_cuda
          ? std::vector<Want>{{"query", {DT::fp8_e4m3fn}}, {"key", {DT::fp8_e4m3fn}}, {"weights", {DT::f32}}, {"query_dequant_scale", {}}, {"key_dequant_scale", {DT::f32}}}
          : std::vector<Want>{{"query", {DT::bf16}}, {"key", {DT::bf16}}, {"weights", {DT::bf16, DT::f32}}, {"query_dequant_scale", {}}, {"key_dequant_scale", {}}};
  for (const Want& x : want) {
    const Tensor* t = c.input_opt(x.tensor);
    std::string names;
    for (DT d : x.dt) names += (names.empty() ? "" : " or ") + std::string(dtype_name(d));
    const std::string expect = x.dt.empty() ? "absent with variant=" + v + (std::string(x.tensor) == "query_dequant_scale" ? " (the query scale is folded into the weights / not used)" : " (no key scale)")
                                            : names + " with variant=" + v;
    if (!t && !x.dt.empty()) bad(std::string("inputs/") + x.tensor, expect, "absent");
    else if (t && (x.dt.empty() || std::find(x.dt.begin(), x.dt.end(), t->dtype()) == x.dt.end()))
      bad(std::string("inputs/") + x.tensor, expect, x.dt.empty() ? "present" : std::string(dtype_name(t->dtype())));
  }
  if (!pr.empty()) return p;
  if (a.i("sparse_mode") != 3) bad("attr sparse_mode", "3 (causal over compressed entries; the only mode the V4 backend uses)", std::to_string(a.i("sparse_mode")));
  if (p.k < 1 || p.k > 2048) bad("attr sparse_count", "1..2048 (A2/A3; 512 for V4-Flash, 1024 for V4-Pro)", std::to_string(p.k));
  if (g.cmp_ratio < 1 || g.cmp_ratio > 65536) bad("attr cmp_ratio", "in [1, 65536] (4 in DeepSeek-V4 C4 layers)", std::to_string(g.cmp_ratio));
  const Tensor& q = c.input("query");
  const Tensor& key = c.input("key");
  const Tensor& bt = c.input("block_table");
  p.T = q.dim(0), p.H = q.dim(1), p.D = q.dim(2);
  g.nblk = key.dim(0), g.bs = key.dim(1), g.maxblk = bt.dim(1), g.B = bt.dim(0);
  if (key.dim(-1) != p.D) bad("inputs/key", "last dim = the query's head dim " + std::to_string(p.D), std::to_string(key.dim(-1)));
  if (key.rank() == 4 && key.dim(2) != 1) bad("inputs/key", "PA_BSND with N = 1 (one shared key head)", "N = " + std::to_string(key.dim(2)));
  if (p.D < 1 || p.D > (1 << 16)) bad("inputs/query", "head dim 1..65536 (int32 dot products stay exact)", std::to_string(p.D));
  if (g.bs < 1) bad("inputs/key", "block size >= 1 (a multiple of 16 on A3)", std::to_string(g.bs));
  li::check_width(c, "sparse_indices", p.k, pr);
  if (!pr.empty() || !li::parse_call(c, li::Call{.row0 = 0, .T = p.T}, g, pr)) return p;
  check_reference_memory(c, 16.0 * static_cast<double>(p.T) * static_cast<double>(std::max<std::int64_t>(g.max_nvis, 1)) +
                                4.0 * static_cast<double>(p.T * p.k),
                         "scores and bounds of every visible entry of every row", pr);
  return p;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4 Ascend quant lightning indexer (int8 q/k, fp16 scales, sparse_mode 3): top-k compressed entries per query";
  s.spec = "v4 §3.5";
  s.formula = "score_j = fl32( sum_h fp16(w[t,h] qs[t,h]) * fp16(relu(q8[t,h,:] . k8[j,:]) 2^-10) * ks[j] ) for j < (p+1) // 4; sparse_indices[t, 0, :] = top sparse_count j, ties to lower j, -1 padded";
  s.schema.attrs = {int_attr("sparse_count", 512, "k: indices per query row (512 V4-Flash, 1024 V4-Pro)"),
                    int_attr("cmp_ratio", 4, "tokens per compressed entry: entry j is visible from position 4j+3 on"),
                    int_attr("sparse_mode", 3, "3 = causal over compressed entries (the only mode supported)"),
                    str_attr("layout_query", "TND", {"TND"}, "query layout (requests packed)"),
                    str_attr("layout_key", "PA_BSND", {"PA_BSND"}, "paged key cache [block, slot, 1, D]"),
                    int_attr("sorted", 1, "1: indices in descending score order (Ascend ops, torch.topk); 0: any order")};
  s.default_profile = "ascend-a3";
  s.profile_doc = "ascend-a3: int8 q/k, wq = fp16(w16 qs16), s = fp16(relu(I) 2^-10), fp32 head sums (order unknown: "
                  "bounded), fp32 x fp16 key scale; vllm-cuda: e4m3 q (scale folded into fp32 weights) and k with fp32 "
                  "pow2 row scales, DeepGEMM fp8 logits (bounded); ref (older value ref-bf16): the reference model's bf16 "
                  "tensors (bounded)";
  s.schema.inputs = {
      {"query", {DT::int8, DT::fp8_e4m3fn, DT::bf16}, {"T,H,D"}, false,
       "query: int8 codes (ascend-a3), e4m3 codes (vllm-cuda), bf16 (ref-bf16)"},
      {"query_dequant_scale", {DT::fp16}, {"T,H"}, true, "qs16: fp16 per (token, head) (ascend-a3 only)"},
      {"weights", {DT::fp16, DT::f32, DT::bf16}, {"T,H"}, false,
       "head weights: fp16(bf16(w) * 0.0110485) (ascend-a3), fp32 with the query scale folded in (vllm-cuda), bf16 (ref-bf16)"},
      {"key", {DT::int8, DT::fp8_e4m3fn, DT::bf16}, {"nblk,bs,1,D", "nblk,bs,D"}, false, "key cache (PA_BSND): the query's kind"},
      {"key_dequant_scale", {DT::fp16, DT::f32}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, true,
       "per cached key: fp16 (ascend-a3), fp32 power of two (vllm-cuda); absent for ref-bf16"},
      {"block_table", {DT::i32}, {"B,maxblk"}, false, "key cache blocks per request"},
      {"actual_seq_lengths_query", {DT::i32, DT::i64}, {"B"}, false, "query rows: prefix sums without the leading 0"},
      {"actual_seq_lengths_key", {DT::i32, DT::i64}, {"B"}, false, "uncompressed tokens per request (seq_lens)"}};
  s.schema.outputs = {{{"sparse_indices", {DT::i32, DT::i64}, {"T,1,?", "T,?"}, false,
                        "top sparse_count compressed-entry indices per row, descending score, -1 padded"},
                       CompareKind::topk_set},
                      {{"sparse_values", {DT::f32, DT::fp16, DT::bf16}, {"T,1,?", "T,?"}, true,
                        "return_value: the scores of the emitted indices, judged at the kernel's own indices (bounded)"},
                       CompareKind::bounded}};
  s.default_tolerance = "derived-bound";  // sparse_values: M = the candidate's score bound + one ulp
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

}  // namespace dsa::v4::indexer
