// v4.indexer_prolog: schema (seed 004's tensors around the A3 indexer), parse, table entry.
#include <string>

#include "stages/v4/indexer_prolog/core.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::indexer_prolog {
namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.amax_zero = a.s("amax_zero") == "scale0" ? AmaxZero::scale0 : AmaxZero::scale1;
  const Tensor* k = c.input_opt("k");
  const Tensor* kc = c.input_opt("k_cache_in");
  const Tensor* ksc = c.input_opt("k_scale_cache_in");
  const Tensor* sm = c.input_opt("slot_mapping");
  if (!c.input_opt("q") && !c.input_opt("weights") && !k)
    bad("inputs", "at least one path: q (query quant), weights (A3 head weights), k (key quant + scatter)", "none");
  if (k && (!kc || !ksc || !sm))
    bad("inputs", "k_cache_in, k_scale_cache_in and slot_mapping with k", std::string(!kc ? "no k_cache_in" : !ksc ? "no k_scale_cache_in" : "no slot_mapping"));
  if (!k && (kc || ksc || sm)) bad("inputs/k", "the key rows when a key cache or slot_mapping is given", "none");
  for (const auto* g : {&c.outputs, &c.expected})
    for (const auto& [n, t] : *g) {
      (void)t;
      const bool q = n == "q_int8" || n == "q_scale", w = n == "weights_fp16", kk = n == "k_cache" || n == "k_scale_cache";
      if ((q && !c.input_opt("q")) || (w && !c.input_opt("weights")) || (kk && !k))
        bad(std::string(g == &c.outputs ? "outputs/" : "expected/") + n, "an output of a path whose input is given",
            "no " + std::string(q ? "inputs/q" : w ? "inputs/weights" : "inputs/k"));
    }
  if (!pr.empty() || !k) return p;
  p.nblk = kc->dim(0), p.bs = kc->dim(1), p.D = k->dim(1);
  p.pairs = sm->rank() == 2;
  if (kc->dim(-1) != p.D) bad("inputs/k_cache_in", "last dim = D of the key rows = " + std::to_string(p.D), std::to_string(kc->dim(-1)));
  if (ksc->dim(0) != p.nblk || ksc->dim(1) != p.bs)
    bad("inputs/k_scale_cache_in", "[nblk, bs, ...] of k_cache_in = [" + std::to_string(p.nblk) + ", " + std::to_string(p.bs) + "]",
        shape_str(ksc->shape()));
  if (sm->dim(0) != k->dim(0)) bad("inputs/slot_mapping", "one entry per key row (" + std::to_string(k->dim(0)) + ")", std::to_string(sm->dim(0)));
  if (!pr.empty()) return p;
  // Pairs: offset inside the block for every row that is written; then the flat slots: in the cache, distinct.
  Tensor flat(DType::i64, {k->dim(0)});
  for (std::int64_t r = 0; r < k->dim(0); ++r) {
    if (p.pairs) {
      const std::int64_t blk = sm->int_at(2 * r), off = sm->int_at(2 * r + 1);
      if (blk >= 0 && (off < 0 || off >= p.bs)) {
        bad("inputs/slot_mapping", "[block, offset] pairs with 0 <= offset < block size " + std::to_string(p.bs) + " (or a negative block: skipped)",
            "row " + std::to_string(r) + ": [" + std::to_string(blk) + ", " + std::to_string(off) + "]");
        return p;
      }
    }
    flat.data<std::int64_t>()[r] = slot_of(c, p, r);
  }
  check_slot_mapping(c, flat, p.nblk * p.bs, "num_blocks*block_size", pr);
  return p;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = "v4.indexer_prolog";
  s.summary = "DeepSeek-V4 Ascend indexer inputs: dynamic_quant_int8 of q and k (fp16 scales), A3 head weights, k8/scale scatter into PA_BSND caches";
  s.spec = "v4 §3.1-3.4";
  s.pipeline_order = 115;
  s.schema.attrs = {str_attr("amax_zero", "scale1", {"scale1", "scale0"},
                             "an all-zero row: scale1 = ops-nn golden.py (scale 1, codes 0); scale0 = the kernel's "
                             "arithmetic (scale 0, the NaN codes cast to 0)"),
                    str_attr("variant", "ascend-a3", {"ascend-a3"}, "A2/A3: int8 codes, fp16 scales and weights")};
  s.schema.inputs = {
      {"q", {DT::bf16}, {"T,H,D"}, true, "the rotated query (after RoPE and the Hadamard), bf16"},
      {"weights", {DT::bf16}, {"T,H"}, true, "weights_proj output (bf16), before the softmax-scale multiply"},
      {"k", {DT::bf16}, {"R,D"}, true, "indexer compressor rows (rotated), bf16"},
      {"slot_mapping", {DT::i32, DT::i64}, {"R,2", "R"}, true, "[block, offset] pairs (A3; negative block = skip) or flat slots (-1 = skip)"},
      {"k_cache_in", {DT::int8}, {"nblk,bs,1,D", "nblk,bs,D"}, true, "int8 key cache before the scatter"},
      {"k_scale_cache_in", {DT::fp16}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, true, "fp16 key scales before the scatter"}};
  s.schema.outputs = {{{"q_int8", {DT::int8}, {"T,H,D"}, false, "query codes"}, CompareKind::bytes},
                      {{"q_scale", {DT::fp16, DT::f32}, {"T,H"}, false, "fp16 query scales (an fp32 dump is judged DTYPE: A3 stores fp16)"}, CompareKind::bytes},
                      {{"weights_fp16", {DT::fp16}, {"T,H"}, false, "A3 head weights"}, CompareKind::bytes},
                      {{"k_cache", {DT::int8}, {"nblk,bs,1,D", "nblk,bs,D"}, false, "key cache after the scatter"}, CompareKind::bytes},
                      {{"k_scale_cache", {DT::fp16}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, false, "scale cache after the scatter"},
                       CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::v4::indexer_prolog
