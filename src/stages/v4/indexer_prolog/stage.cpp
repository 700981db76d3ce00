// v4.indexer_prolog: schema (seed 004's tensors around the A3 indexer), parse, table entry.
#include <cmath>
#include <string>

#include "numerics/formats.hpp"
#include "profiles/profiles.hpp"

#include "stages/v4/indexer_prolog/stage.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::indexer_prolog {

namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.amax_zero = a.s("amax_zero") == "scale0" ? AmaxZero::scale0 : AmaxZero::scale1;
  p.hadamard = a.s("hadamard") == "fwht" ? HadamardKind::fwht : HadamardKind::ascend;
  p.vllm = a.profile() == &profiles::vllm_cuda();
  p.mxfp4 = a.has("q_format") && a.s("q_format") == "mxfp4";
  if (a.has("q_format") && !p.vllm) bad("attr q_format", "only with attr kernel = vllm-cuda (fused_indexer_q_rope_quant)", a.s("q_format"));
  // Absent: derived as vLLM derives them, head_dim^-0.5 and n_head^-0.5 of the query's shape (set below).
  const bool has_sm = c.has_attr("softmax_scale"), has_hs = c.has_attr("head_scale");
  if (has_sm) p.softmax_scale = a.f("softmax_scale");
  if (has_hs) p.head_scale = a.f("head_scale");
  static const char* kVllmIn[] = {"index_q", "positions", "cos_sin_cache", "index_weights"};
  if (p.vllm) {
    for (const char* n : {"q", "q_pre", "rope_cos", "rope_sin", "weights", "k", "slot_mapping", "k_cache_in", "k_scale_cache_in"})
      if (c.input_opt(n)) bad(std::string("inputs/") + n, "none with kernel vllm-cuda (its inputs: index_q, positions, cos_sin_cache, index_weights)", "present");
    for (const char* n : kVllmIn)
      if (!c.input_opt(n)) bad(std::string("inputs/") + n, "present with kernel vllm-cuda (fused_indexer_q_rope_quant's inputs)", "absent");
    for (const auto* g : {&c.outputs, &c.expected})
      for (const auto& [n, t] : *g) {
        (void)t;
        const bool ok = n == "weights_out" || (p.mxfp4 ? n == "q_fp4" || n == "q_fp4_scale" : n == "q_fp8");
        if (!ok)
          bad(std::string(g == &c.outputs ? "outputs/" : "expected/") + n,
              p.mxfp4 ? "q_fp4, q_fp4_scale or weights_out with q_format mxfp4" : "q_fp8 or weights_out with kernel vllm-cuda", n);
      }
    if (!std::isfinite(p.softmax_scale) || !std::isfinite(p.head_scale))
      bad("attr softmax_scale, head_scale", "finite numbers", std::to_string(p.softmax_scale) + ", " + std::to_string(p.head_scale));
    if (!pr.empty()) return p;
    const Tensor& x = c.input("index_q");
    const Tensor& pos = c.input("positions");
    const Tensor& cs = c.input("cos_sin_cache");
    const Tensor& w = c.input("index_weights");
    if (x.dim(2) != 128) bad("inputs/index_q", "head dim 128 (64 nope + 64 rope dims, the V4 indexer)", std::to_string(x.dim(2)));
    if (!has_sm) p.softmax_scale = 1.0 / std::sqrt(static_cast<double>(x.dim(2)));
    if (!has_hs && x.dim(1) > 0) p.head_scale = 1.0 / std::sqrt(static_cast<double>(x.dim(1)));
    if (cs.dim(1) != 64) bad("inputs/cos_sin_cache", "[P, 64]: cos 32 | sin 32 per position (rope dim 64)", shape_str(cs.shape()));
    if (pos.dim(0) != x.dim(0)) bad("inputs/positions", "one per token (T = " + std::to_string(x.dim(0)) + ")", std::to_string(pos.dim(0)));
    if (w.dim(0) != x.dim(0) || w.dim(1) != x.dim(1))
      bad("inputs/index_weights", "[T, H] = [" + std::to_string(x.dim(0)) + ", " + std::to_string(x.dim(1)) + "]", shape_str(w.shape()));
    if (!pr.empty()) return p;
    for (std::int64_t t = 0; t < pos.numel(); ++t)
      if (pos.int_at(t) < 0 || pos.int_at(t) >= cs.dim(0)) {
        bad("inputs/positions", "0 <= position < cos_sin_cache rows (" + std::to_string(cs.dim(0)) + ")",
            "token " + std::to_string(t) + ": " + std::to_string(pos.int_at(t)));
        break;
      }
    return p;
  }
  for (const char* n : kVllmIn)
    if (c.input_opt(n)) bad(std::string("inputs/") + n, "only with attr kernel = vllm-cuda (the fp8 indexer q path)", "present");
  for (const char* n : {"q_fp8", "weights_out", "q_fp4", "q_fp4_scale"})
    if (c.outputs.count(n) || c.expected.count(n)) bad(std::string("outputs/") + n, "only with attr kernel = vllm-cuda", "present");
  const Tensor* pre = c.input_opt("q_pre");
  const Tensor* cs = c.input_opt("rope_cos");
  const Tensor* sn = c.input_opt("rope_sin");
  if (pre && c.input_opt("q")) bad("inputs/q_pre", "either q (the rotated query) or q_pre (before RoPE and Hadamard), not both", "both");
  if (pre && (!cs || !sn)) bad("inputs/rope_cos, inputs/rope_sin", "both with q_pre (the tokens' fp32 RoPE table rows)", !cs ? "no rope_cos" : "no rope_sin");
  if (!pre && (cs || sn)) bad("inputs/q_pre", "the query before RoPE when a RoPE table is given", "none");
  if (pre && cs && sn) {
    const std::int64_t D = pre->dim(2);
    if (D < 64 || D > (1 << 16) || (D & (D - 1)) != 0)
      bad("inputs/q_pre", "head dim a power of two in 64..65536 (RoPE on the last 64 dims, then the Hadamard)", std::to_string(D));
    for (const Tensor* t : {cs, sn}) {
      const std::string n = t == cs ? "inputs/rope_cos" : "inputs/rope_sin";
      if (t->dim(0) != pre->dim(0) || (t->dim(-1) != 32 && t->dim(-1) != 64)) {
        bad(n, "[T, 32] or the interleave-duplicated [T, 64] (T = " + std::to_string(pre->dim(0)) + ")", shape_str(t->shape()));
        continue;
      }
      if (t->dim(-1) == 64)
        for (std::int64_t i = 0; i < t->numel(); i += 2)
          if (num::f32_bits(t->data<float>()[i]) != num::f32_bits(t->data<float>()[i + 1])) {
            bad(n, "an interleave-duplicated table (entry 2i = entry 2i+1, the Ascend [N,1,1,64] layout)",
                "token " + std::to_string(i / 64) + " entries " + std::to_string(i % 64) + ", " + std::to_string(i % 64 + 1) + " differ");
            break;
          }
    }
    const bool quant_out = c.outputs.count("q_int8") || c.outputs.count("q_scale");
    if (quant_out && !c.outputs.count("q_rot"))
      bad("outputs/q_rot", "the kernel's rotated query with q_int8 / q_scale when the path starts at q_pre (the quant is judged on it)",
          "absent");
  }
  const Tensor* k = c.input_opt("k");
  const Tensor* kc = c.input_opt("k_cache_in");
  const Tensor* ksc = c.input_opt("k_scale_cache_in");
  const Tensor* sm = c.input_opt("slot_mapping");
  const bool qpath = c.input_opt("q") || pre;
  if (!qpath && !c.input_opt("weights") && !k)
    bad("inputs", "at least one path: q or q_pre (query), weights (A3 head weights), k (key quant + scatter)", "none");
  if (k && (!kc || !ksc || !sm))
    bad("inputs", "k_cache_in, k_scale_cache_in and slot_mapping with k", std::string(!kc ? "no k_cache_in" : !ksc ? "no k_scale_cache_in" : "no slot_mapping"));
  if (!k && (kc || ksc || sm)) bad("inputs/k", "the key rows when a key cache or slot_mapping is given", "none");
  for (const auto* g : {&c.outputs, &c.expected})
    for (const auto& [n, t] : *g) {
      (void)t;
      const bool q = n == "q_int8" || n == "q_scale", w = n == "weights_fp16", kk = n == "k_cache" || n == "k_scale_cache";
      if ((q && !qpath) || (n == "q_rot" && !pre) || (w && !c.input_opt("weights")) || (kk && !k))
        bad(std::string(g == &c.outputs ? "outputs/" : "expected/") + n, "an output of a path whose input is given",
            "no " + std::string(q ? "inputs/q or inputs/q_pre" : n == "q_rot" ? "inputs/q_pre" : w ? "inputs/weights" : "inputs/k"));
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
  s.formula = "(q8, q_scale) = dynamic_quant_int8(q_rot) per (token, head), q_scale fp16; w16 = fp16(bf16(fl32(w fl32(0.011048543456039806)))); (k8, k_scale) = dynamic_quant_int8(k) scattered into the PA_BSND caches at slot_mapping";
  s.schema.attrs = {str_attr("amax_zero", "scale1", {"scale1", "scale0"},
                             "an all-zero row: scale1 = ops-nn golden.py (scale 1, codes 0); scale0 = the kernel's "
                             "arithmetic (scale 0, the NaN codes cast to 0)"),
                    str_attr("hadamard", "ascend", {"ascend", "fwht"},
                             "q path from q_pre: ascend = bf16(r @ H^T) then bf16(x 128^-0.5) (vLLM-Ascend rotate_activation); "
                             "fwht = the reference model's fp32 FWHT then bf16(x 128^-0.5)"),
                    AttrSpec{"softmax_scale", AttrType::number, false, std::nullopt, {},
                             "kernel vllm-cuda: index_weights_softmax_scale of the weight fold, passed as fp32 (absent: "
                             "head_dim^-0.5 of index_q, as vLLM derives it)"},
                    AttrSpec{"head_scale", AttrType::number, false, std::nullopt, {},
                             "kernel vllm-cuda: index_weights_head_scale of the weight fold, fp32 (absent: n_head^-0.5 "
                             "of index_q's heads, as vLLM derives it)"},
                    opt_str_attr("q_format", {"fp8", "mxfp4"},
                                 "kernel vllm-cuda: fp8 (q_fp8, the pow2 q scale folded into weights_out; absent) or mxfp4 "
                                 "(use_fp4, DeepSeek-V4.1: q_fp4 + ue8m0 q_fp4_scale per 32 dims, weights_out = w * "
                                 "softmax_scale * head_scale)")};
  s.schema.inputs = {
      {"q", {DT::bf16}, {"T,H,D"}, true, "the rotated query (after RoPE and the Hadamard), bf16"},
      {"q_pre", {DT::bf16}, {"T,H,D"}, true, "or: the query before RoPE and the Hadamard (wq_b output), bf16"},
      {"rope_cos", {DT::f32}, {"T,?"}, true, "with q_pre: each token's cos row, [T, 32] or the interleave-duplicated [T, 64]"},
      {"rope_sin", {DT::f32}, {"T,?"}, true, "with q_pre: each token's sin row, same layout"},
      {"weights", {DT::bf16}, {"T,H"}, true, "weights_proj output (bf16), before the softmax-scale multiply"},
      {"k", {DT::bf16}, {"R,D"}, true, "indexer compressor rows (rotated), bf16"},
      {"slot_mapping", {DT::i32, DT::i64}, {"R,2", "R"}, true, "[block, offset] pairs (A3; negative block = skip) or flat slots (-1 = skip)"},
      {"k_cache_in", {DT::int8}, {"nblk,bs,1,D", "nblk,bs,D"}, true, "int8 key cache before the scatter"},
      {"k_scale_cache_in", {DT::fp16}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, true, "fp16 key scales before the scatter"},
      {"index_q", {DT::bf16}, {"T,H,D"}, true, "kernel vllm-cuda: the indexer query before RoPE (wq_b output), bf16 [T, H, 128]"},
      {"positions", {DT::i64, DT::i32}, {"T"}, true, "kernel vllm-cuda: each token's position (row of cos_sin_cache)"},
      {"cos_sin_cache", {DT::f32, DT::bf16}, {"P,R"}, true, "kernel vllm-cuda: the RoPE cache [P, 64], cos 32 | sin 32 per position"},
      {"index_weights", {DT::bf16, DT::f32}, {"T,H"}, true, "kernel vllm-cuda: the head weights (weights_proj output) before the fold"}};
  s.schema.outputs = {{{"q_rot", {DT::bf16}, {"T,H,D"}, false, "with q_pre: the rotated query (RoPE + Hadamard), bounded per element"},
                       CompareKind::bounded},
                      {{"q_int8", {DT::int8}, {"T,H,D"}, false, "query codes"}, CompareKind::bytes},
                      {{"q_scale", {DT::fp16, DT::f32}, {"T,H"}, false, "fp16 query scales (an fp32 dump is judged DTYPE: A3 stores fp16)"}, CompareKind::bytes},
                      {{"weights_fp16", {DT::fp16}, {"T,H"}, false, "A3 head weights"}, CompareKind::bytes},
                      {{"k_cache", {DT::int8}, {"nblk,bs,1,D", "nblk,bs,D"}, false, "key cache after the scatter"}, CompareKind::bytes},
                      {{"k_scale_cache", {DT::fp16}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, false, "scale cache after the scatter"},
                       CompareKind::bytes},
                      {{"q_fp8", {DT::fp8_e4m3fn}, {"T,H,D"}, false,
                        "kernel vllm-cuda: e4m3 query codes (scale folded into weights_out); exact but for the flips Triton's approximations allow"},
                       CompareKind::bounded},
                      {{"weights_out", {DT::f32}, {"T,H"}, false, "kernel vllm-cuda: fl32(fl32(fl32(w * s) * softmax_scale) * head_scale) (mxfp4: without s)"},
                       CompareKind::bounded},
                      {{"q_fp4", {DT::u8}, {"T,H,?"}, false,
                        "kernel vllm-cuda, q_format mxfp4: e2m1 codes [T, H, D/2] (dim 2i low nibble); bytes, with candidates where the fp32 RoPE can flip a bf16 rounding"},
                       CompareKind::bytes},
                      {{"q_fp4_scale", {DT::u8}, {"T,H,?"}, false, "kernel vllm-cuda, q_format mxfp4: ue8m0 bytes [T, H, D/32]"}, CompareKind::bytes}};
  s.default_profile = "ascend-a3";
  s.profile_doc = "ascend-a3 (A2/A3): int8 codes, fp16 scales and weights; vllm-cuda: the fp8 indexer q path "
                  "(fused_indexer_q_rope_quant FP8: RoPE, pow2 scale folded into fp32 weights, no Hadamard)";
  s.default_tolerance = "derived-bound";  // q_rot: its per-element bound (the other outputs are bytes)
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

}  // namespace dsa::v4::indexer_prolog
