// v4.compressor_cache: schema (vLLM's CUDA compressor kernels' own tensors), parse, the rotate note, table entry.
#include <set>
#include <string>

#include "layouts/mla_kcache.hpp"
#include "stages/v4/compressor_cache/stage.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::compressor_cache {
namespace {

const char* kName = "v4.compressor_cache";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  auto S = [](std::int64_t v) { return std::to_string(v); };
  p.r = a.i("cmp_ratio");
  p.rope = a.i("rope_head_dim");
  p.eps = a.f("norm_eps");
  p.rotate = a.b("rotate");
  const Tensor& ks = c.input("kv_score");
  const Tensor& st = c.input("state_cache_in");
  const Tensor& kc = c.input("kv_cache_in");
  const Tensor& bt = c.input("block_table");
  const Tensor& cs = c.input("cos_sin_cache");
  p.D = c.input("norm_weight").dim(0);
  p.T = ks.dim(0);
  p.C2 = ks.dim(1) / 2;
  p.coff = p.r == 4 ? 2 : 1;  // vLLM: overlap = compress_ratio == 4
  p.B = bt.dim(0), p.maxblk = bt.dim(1);
  p.nblk = st.dim(0), p.sbs = st.dim(1);
  p.kblk = kc.dim(0), p.kbs = kc.dim(1);
  p.rec = p.D == 512 ? layouts::Model1KCache::kRecord : p.D + 4;
  if (p.r < 1 || p.r > 65536) bad("attr cmp_ratio", "in [1, 65536] (4 or 128 in DeepSeek-V4)", S(p.r));
  if (!(p.eps >= 0 && std::isfinite(p.eps))) bad("attr norm_eps", "a finite number >= 0", std::to_string(p.eps));
  if (p.D != 128 && p.D != 512) bad("inputs/norm_weight", "D = 512 (main compressor) or 128 (indexer compressor)", S(p.D));
  if (p.rope % 2 != 0 || p.rope < 2 || p.rope > p.D || (p.D == 512 && p.rope != 64))
    bad("attr rope_head_dim", "even, <= D (64 with D 512: the MODEL1 record's 64 bf16 rope dims)", S(p.rope));
  if (ks.dim(1) != 2 * p.coff * p.D)
    bad("inputs/kv_score", "dim 1 = 2 * coff * D = " + S(2 * p.coff * p.D) + " (coff " + S(p.coff) + " for cmp_ratio " + S(p.r) + ")", S(ks.dim(1)));
  const Tensor& ape = c.input("ape");
  if (ape.dim(0) != p.r || ape.dim(1) != p.coff * p.D) bad("inputs/ape", "[cmp_ratio, coff * D] = [" + S(p.r) + ", " + S(p.coff * p.D) + "]", shape_str(ape.shape()));
  if (st.dim(2) != 2 * p.coff * p.D) bad("inputs/state_cache_in", "dim 2 = 2 * coff * D = " + S(2 * p.coff * p.D), S(st.dim(2)));
  if (kc.dim(2) != p.rec)
    bad("inputs/kv_cache_in", "dim 2 = " + S(p.rec) + (p.D == 512 ? " (MODEL1 584-byte records)" : " (128 e4m3 codes + one fp32 scale per token)"), S(kc.dim(2)));
  if (cs.dim(1) != p.rope) bad("inputs/cos_sin_cache", "dim 1 = rope_head_dim = " + S(p.rope) + " (cos | sin halves)", S(cs.dim(1)));
  for (const char* n : {"positions", "slot_mapping", "token_to_req_indices", "kv_slot_mapping"})
    if (c.input(n).numel() != p.T) bad(std::string("inputs/") + n, "T = " + S(p.T) + " entries (one per token of kv_score)", S(c.input(n).numel()));
  for (const auto* g : {&c.outputs, &c.expected})
    for (const auto& [n, src] : {std::pair<const char*, const Tensor*>{"state_cache", &st}, {"kv_cache", &kc}})
      if (auto it = g->find(n); it != g->end() && it->second.shape() != src->shape())
        bad(std::string(g == &c.outputs ? "outputs/" : "expected/") + n, std::string("the shape of inputs/") + n + "_in " + shape_str(src->shape()),
            shape_str(it->second.shape()));
  if (!pr.empty()) return p;
  const Tensor &pos = c.input("positions"), &sm = c.input("slot_mapping"), &req = c.input("token_to_req_indices"), &km = c.input("kv_slot_mapping");
  std::set<std::int64_t> sslots, kslots;
  for (std::int64_t t = 0; t < p.T; ++t) {
    const std::int64_t s = sm.int_at(t), ps = pos.int_at(t), b = req.int_at(t), k = km.int_at(t);
    const std::string tok = "token " + S(t);
    if (s < 0) continue;  // pad: the kernels return before reading anything else
    if (s >= p.nblk * p.sbs) return bad("inputs/slot_mapping", "-1 or a state slot in [0, " + S(p.nblk * p.sbs) + ")", tok + ": " + S(s)), p;
    if (!sslots.insert(s).second) return bad("inputs/slot_mapping", "distinct state slots (the result would depend on write order)", tok + " repeats slot " + S(s)), p;
    if (ps < 0 || ps > (std::int64_t{1} << 40)) return bad("inputs/positions", "in [0, 2^40]", tok + ": " + S(ps)), p;
    if (b < 0 || b >= p.B) return bad("inputs/token_to_req_indices", "a row of block_table in [0, " + S(p.B) + ")", tok + ": " + S(b)), p;
    if ((ps + 1) % p.r != 0 || k < 0) continue;
    if (k >= p.kblk * p.kbs) return bad("inputs/kv_slot_mapping", "-1 or a cache slot in [0, " + S(p.kblk * p.kbs) + ")", tok + ": " + S(k)), p;
    if (!kslots.insert(k).second) return bad("inputs/kv_slot_mapping", "distinct slots for the emitting tokens", tok + " repeats slot " + S(k)), p;
    const std::int64_t cp = ps / p.r * p.r;
    if (cp >= cs.dim(0)) return bad("inputs/cos_sin_cache", "a row for every compressed position (" + S(cp) + ")", S(cs.dim(0)) + " rows"), p;
    for (std::int64_t q = std::max<std::int64_t>(0, ps - p.coff * p.r + 1); q <= ps; ++q) {
      if (q / p.sbs >= p.maxblk)
        return bad("inputs/block_table", "an entry for every state row an emitting token reads (" + S(p.maxblk) + " per request)",
                   tok + " (request " + S(b) + ") reads position " + S(q) + " in block index " + S(q / p.sbs)), p;
      const std::int64_t id = bt.int_at(b * p.maxblk + q / p.sbs);
      if (id < 0 || id >= p.nblk)
        return bad("inputs/block_table", "block ids in [0, " + S(p.nblk) + ")", "request " + S(b) + " block index " + S(q / p.sbs) + ": " + S(id)), p;
    }
  }
  return p;
}

void sanity(const Case& c, const std::string& tensor, const Tensor&, std::vector<std::string>& f) {
  if (tensor != "kv_cache") return;
  const AttrReader a(c, find_stage(kName)->schema);
  if (a.b("rotate"))
    // A fact about the case, not an explanation of a failure: main's kNotePrefix ("note: ") lists it as a note only.
    f.push_back("note: rotate = 1 is not applied: the vLLM CUDA path applies no Hadamard (the flag is stored, no kernel reads it)");
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4 KV compressor as vLLM's CUDA kernels write it: state rows, then compress / RMSNorm / RoPE / FP8 into the paged KV cache "
              "(584-byte MODEL1 main records, 132-byte indexer records)";
  s.spec = "v4 §10";
  s.formula = "state_cache[slot] = [kv | score + ape]; at (p+1) % r == 0: c = per-channel softmax pool of the coff*r state rows, normed = c rsqrt(mean c^2 + eps) gamma, RoPE at (p / r) r, FP8 (ue8m0 blocks) into the 584-byte (D 512) or 132-byte (D 128) kv_cache record";
  s.schema.attrs = {
      int_attr("cmp_ratio", 4, "r: tokens per compressed entry (4: overlap, coff 2; 128: coff 1)"),
      int_attr("rope_head_dim", 64, "RoPE dims (the last ones of D), GPT-J interleaved pairs"),
      num_attr("norm_eps", 1e-6, "RMSNorm epsilon"),
      bool_attr("rotate", false, "the model's indexer flag: stored, applied by no vLLM CUDA kernel (a note says so)")};
  s.schema.inputs = {
      {"kv_score", {DT::f32}, {"T,?"}, false, "fused projection x . [wkv; wgate]^T (fp32): kv [0, coff*D) | score [coff*D, 2*coff*D)"},
      {"ape", {DT::f32}, {"cmp_ratio,?"}, false, "position-in-group embedding added to the saved scores"},
      {"norm_weight", {DT::bf16}, {"D"}, false, "RMSNorm weight (D 512: main compressor, 128: indexer compressor)"},
      {"cos_sin_cache", {DT::f32}, {"P,rope_head_dim"}, false, "RoPE table: row pos = cos [rope/2] | sin [rope/2]"},
      {"positions", {DT::i64, DT::i32}, {"T"}, false, "position of each token"},
      {"token_to_req_indices", {DT::i32, DT::i64}, {"T"}, false, "request (row of block_table) of each token"},
      {"slot_mapping", {DT::i64, DT::i32}, {"T"}, false, "state slot block*sbs+offset per token; -1 = pad (nothing read or written)"},
      {"block_table", {DT::i32}, {"B,maxblk"}, false, "state cache block ids per request (0 = vLLM's null block)"},
      {"kv_slot_mapping", {DT::i64, DT::i32}, {"T"}, false, "compressed KV cache slot block*kbs+offset per token; -1 = no write"},
      {"state_cache_in", {DT::f32}, {"nblk,sbs,?"}, false, "state rows before the step: kv (coff*D) | score + ape (coff*D)"},
      {"kv_cache_in", {DT::u8}, {"kblk,kbs,rec"}, false, "paged fp8 KV cache bytes before the step (584 per token for D 512, 132 for D 128)"}};
  s.schema.outputs = {{{"state_cache", {DT::f32}, {"nblk,sbs,?"}, false, "state rows after the step (exact)"}, CompareKind::bytes},
                      {{"kv_cache", {DT::u8}, {"kblk,kbs,rec"}, false, "KV cache bytes after the step (bit-exact; candidate bytes where Triton's approximations can flip a rounding)"},
                       CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
  s.sanity = sanity;
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::v4::compressor_cache
