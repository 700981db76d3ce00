// v41.indexer_k: schema (the tensors of vLLM's indexer_k_norm_rope_store), parse, hints, table entry.
#include <set>
#include <string>

#include "stages/v41/indexer_k/stage.hpp"
#include "stages/v41/table.hpp"

namespace dsa::v41::indexer_k {
namespace {

const char* kName = "v41.indexer_k";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  auto S = [](std::int64_t v) { return std::to_string(v); };
  p.r = a.i("cmp_ratio");
  p.eps = static_cast<double>(static_cast<float>(a.f("norm_eps")));
  const Tensor& kp = c.input("k_pre");
  const Tensor& kc = c.input("k_cache_in");
  const Tensor& cs = c.input("cos_sin_cache");
  p.T = kp.dim(0);
  if (p.r != 1 && p.r != 2) bad("attr cmp_ratio", "1 or 2 (the V4.1 KV source layers; the kernel asserts it)", S(p.r));
  if (!(a.f("norm_eps") >= 0 && std::isfinite(a.f("norm_eps")))) bad("attr norm_eps", "a finite number >= 0", std::to_string(a.f("norm_eps")));
  if (kp.dim(1) != 128) bad("inputs/k_pre", "[T, 128] (wk(latent): the indexer head dim)", shape_str(kp.shape()));
  if (c.input("norm_weight").dim(0) != 128) bad("inputs/norm_weight", "128 entries (k_norm)", S(c.input("norm_weight").dim(0)));
  if (cs.dim(1) != 64) bad("inputs/cos_sin_cache", "dim 1 = 64 (cos [32] | sin [32] of the 64 RoPE dims)", S(cs.dim(1)));
  for (const char* n : {"positions", "kv_slot_mapping"})
    if (c.input(n).numel() != p.T) bad(std::string("inputs/") + n, "T = " + S(p.T) + " entries (one per row of k_pre)", S(c.input(n).numel()));
  // The record: named by attr layout or by the cache's width (68: MXFP4, 132: its FP8 option).
  const std::int64_t w = kc.dim(2);
  const std::string lay = a.has("layout") ? a.s("layout") : w == 132 ? "v41_idx_fp8_132" : "v41_idx_mxfp4_68";
  const layouts::RecordFormat* f = layouts::find_record(lay);
  if (f->record_bytes() != w)
    bad("inputs/k_cache_in", "dim 2 = " + S(f->record_bytes()) + " (" + lay + (a.has("layout") ? ", attr layout" : "") + ")",
        S(w) + (a.has("layout") ? "" : " (68: v41_idx_mxfp4_68, 132: v41_idx_fp8_132)"));
  // No page-size rule here: the writer takes any page; the readers check theirs (v41.logits: 512-byte page strides).
  p.rec = layouts::KvRecord{f, layouts::RecordOrder::page_segregated, kc.dim(1)};
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("k_cache"); it != g->end() && it->second.shape() != kc.shape())
      bad(std::string(g == &c.outputs ? "outputs/" : "expected/") + "k_cache", "the shape of inputs/k_cache_in " + shape_str(kc.shape()),
          shape_str(it->second.shape()));
  if (!pr.empty()) return p;
  const Tensor &pos = c.input("positions"), &km = c.input("kv_slot_mapping");
  const std::int64_t cap = kc.dim(0) * kc.dim(1);
  std::set<std::int64_t> slots;
  for (std::int64_t t = 0; t < p.T; ++t) {
    const std::int64_t s = km.int_at(t), ps = pos.int_at(t);
    const std::string tok = "token " + S(t);
    if (s < 0) continue;  // the kernel returns before reading anything else
    if (ps < 0 || ps > (std::int64_t{1} << 40)) return bad("inputs/positions", "in [0, 2^40]", tok + ": " + S(ps)), p;
    if ((ps + 1) % p.r != 0) continue;  // mid-group: no key
    if (s >= cap) return bad("inputs/kv_slot_mapping", "-1 or a slot in [0, " + S(cap) + ")", tok + ": " + S(s)), p;
    if (!slots.insert(s).second)
      return bad("inputs/kv_slot_mapping", "distinct slots for the group-closing tokens (the result would depend on write order)",
                 tok + " repeats slot " + S(s)), p;
    if (ps / p.r * p.r >= cs.dim(0))
      return bad("inputs/cos_sin_cache", "a row for every group start (" + S(ps / p.r * p.r) + ")", S(cs.dim(0)) + " rows"), p;
  }
  return p;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4.1 indexer K store as vLLM's Triton kernel runs it: k_norm, RoPE at the group start, MXFP4 (68 B) or FP8 (132 B) into the paged indexer K cache";
  s.spec = "v41 §5";
  s.formula = "for t with slot >= 0 and (p+1) % r == 0: k = bf16(k_pre rsqrt(mean k_pre^2 + eps) w); k[64:] = bf16(GPT-J RoPE at (p/r) r); quantized into the v41_idx_mxfp4_68 / v41_idx_fp8_132 record";
  s.schema.attrs = {
      int_attr("cmp_ratio", 2, "r: 2 or 1 (the V4.1 KV source layers); a key is written only by a token whose (p + 1) % r == 0"),
      num_attr("norm_eps", 1e-6, "k_norm RMSNorm epsilon (the kernel holds it in fp32)"),
      opt_str_attr("layout", {"v41_idx_mxfp4_68", "v41_idx_fp8_132"},
                   "the cache record (layouts/kv_records.hpp): v41_idx_mxfp4_68 (use_fp4_cache) or v41_idx_fp8_132 (the FP8 "
                   "option); absent = the one of k_cache_in's width")};
  s.schema.inputs = {
      {"k_pre", {DT::bf16}, {"T,128"}, false, "wk(latent) per token (the GEMM before the kernel); only group-closing rows are read"},
      {"positions", {DT::i64, DT::i32}, {"T"}, false, "token positions"},
      {"cos_sin_cache", {DT::f32}, {"P,64"}, false, "the compress-RoPE table: row pos = cos [32] | sin [32]"},
      {"norm_weight", {DT::bf16}, {"128"}, false, "k_norm weight"},
      {"kv_slot_mapping", {DT::i64, DT::i32}, {"T"}, false, "indexer cache slot page * page_size + offset per token; -1 = skip"},
      {"k_cache_in", {DT::u8}, {"nblk,page_size,rec"}, false, "the paged indexer K cache before the store (68 or 132 bytes per slot)"}};
  s.schema.outputs = {{{"k_cache", {DT::u8}, {"nblk,page_size,rec"}, false,
                        "the cache after the store (bit-exact; candidate bytes where an approximate rsqrt can flip a bf16 rounding)"},
                       CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  s.hypotheses = hypotheses();
  return s;
}

}  // namespace dsa::v41::indexer_k
