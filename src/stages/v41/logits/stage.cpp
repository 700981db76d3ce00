// v41.logits: schema (DeepGEMM's fp8_fp4_mqa_logits / fp8_fp4_paged_sparse_mqa_logits tensors), parse with the
// sparse contract, table entry.
#include <string>

#include "stages/v41/logits/stage.hpp"
#include "stages/v41/table.hpp"

namespace dsa::v41::logits {
namespace {

const char* kName = "v41.logits";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  auto S = [](std::int64_t v) { return std::to_string(v); };
  p.clean = a.b("clean_logits");
  p.bf16 = a.s("logits_dtype") == "bf16";
  p.sbk = a.i("sparse_block_kv");
  p.next_n = a.i("next_n");
  const Tensor& q = c.input("q_fp4");
  const Tensor& qs = c.input("q_sf");
  const Tensor& w = c.input("weights");
  p.R = q.dim(0), p.H = q.dim(1), p.D = 2 * q.dim(2);
  if (p.H < 8 || p.H > 64) bad("inputs/q_fp4", "H in 8..64 heads (DeepGEMM's FP4 logits)", S(p.H));
  if (p.D != 64 && p.D != 128) bad("inputs/q_fp4", "D / 2 = 32 or 64 packed bytes per head (D 64 or 128)", S(q.dim(2)));
  const bool sf_ok = qs.dim(0) == p.R && qs.dim(1) == p.H &&
                     (qs.dtype() == DType::i32 ? qs.rank() == 2 : qs.rank() == 3 && qs.dim(2) == p.D / 32);
  if (!sf_ok)
    bad("inputs/q_sf", "int32 [R, H] = [" + S(p.R) + ", " + S(p.H) + "] or uint8 [R, H, D/32] = [" + S(p.R) + ", " + S(p.H) + ", " + S(p.D / 32) + "]",
        shape_str(qs.shape()));
  if (w.dim(0) != p.R || w.dim(1) != p.H) bad("inputs/weights", "[R, H] = [" + S(p.R) + ", " + S(p.H) + "]", shape_str(w.shape()));
  if (w.dtype() == DType::bf16 && !p.bf16) bad("attr logits_dtype", "bf16 with bf16 weights (DeepGEMM: bf16 weights need bf16 logits)", "float32");
  const bool ragged = c.input_opt("kv_fp4") != nullptr;
  p.paged = c.input_opt("kv_cache") != nullptr;
  static const char* kRagged[] = {"kv_fp4", "kv_sf", "ks", "ke"};
  static const char* kPaged[] = {"kv_cache", "context_lens", "block_table", "sparse_blocks"};
  if (ragged == p.paged) {
    bad("inputs", "either kv_fp4, kv_sf, ks, ke (fp8_fp4_mqa_logits) or kv_cache, context_lens, block_table, sparse_blocks "
        "(fp8_fp4_paged_sparse_mqa_logits)", ragged ? "both" : "neither");
    return p;
  }
  for (const char* n : p.paged ? kPaged : kRagged)
    if (!c.input_opt(n)) bad(std::string("inputs/") + n, std::string("present (") + (p.paged ? "the paged sparse" : "the ragged") + " variant's inputs)", "absent");
  for (const char* n : p.paged ? kRagged : kPaged)
    if (c.input_opt(n)) bad(std::string("inputs/") + n, std::string("absent in the ") + (p.paged ? "paged sparse" : "ragged") + " variant", "present");
  if (!pr.empty()) return p;
  if (!p.paged) {
    const Tensor& kv = c.input("kv_fp4");
    if (kv.dim(1) != p.D / 2) bad("inputs/kv_fp4", "[N, D/2] = [N, " + S(p.D / 2) + "]", shape_str(kv.shape()));
    if (c.input("kv_sf").numel() != kv.dim(0)) bad("inputs/kv_sf", "one int32 per key (N = " + S(kv.dim(0)) + ")", S(c.input("kv_sf").numel()));
    for (const char* n : {"ks", "ke"})
      if (c.input(n).numel() != p.R) bad(std::string("inputs/") + n, "one per row (R = " + S(p.R) + ")", S(c.input(n).numel()));
    if (!pr.empty()) return p;
    p.cols = kv.dim(0);
    for (std::int64_t r = 0; r < p.R; ++r) {
      const std::int64_t lo = c.input("ks").int_at(r), hi = c.input("ke").int_at(r);
      if (lo < 0 || hi < lo || hi > p.cols)
        return bad("inputs/ks, inputs/ke", "0 <= ks <= ke <= N = " + S(p.cols), "row " + S(r) + ": [" + S(lo) + ", " + S(hi) + ")"), p;
    }
    return p;
  }
  // The paged sparse variant: DeepGEMM's contract (spec v41 §5).
  const Tensor& kc = c.input("kv_cache");
  const Tensor& bt = c.input("block_table");
  const Tensor& sb = c.input("sparse_blocks");
  const Tensor& cl = c.input("context_lens");
  if (p.D != 128) bad("inputs/q_fp4", "D 128 (the paged sparse kernel's 68-byte pages: 64 code bytes + 4 scales)", S(p.D));
  if (kc.dim(-1) != 68) bad("inputs/kv_cache", "[pages, page_size, (1,) 68] (v41_idx_mxfp4_68 records)", shape_str(kc.shape()));
  if (p.sbk != 8 && p.sbk != 16) bad("attr sparse_block_kv", "8 or 16", S(p.sbk));
  if (p.next_n != 1 && p.next_n != 2) bad("attr next_n", "1 or 2 (queries per request row pair)", S(p.next_n));
  p.nsb = sb.dim(1);
  p.maxp = bt.dim(1);
  if (p.nsb % 4 != 0 || p.nsb > 4096) bad("inputs/sparse_blocks", "num_max_sparse_blocks a multiple of 4, <= 4096", S(p.nsb));
  if (sb.dim(0) != p.R || bt.dim(0) != p.R || cl.numel() != p.R)
    bad("inputs/sparse_blocks, block_table, context_lens", "one row per query row (R = " + S(p.R) + ")",
        S(sb.dim(0)) + ", " + S(bt.dim(0)) + ", " + S(cl.numel()));
  if (!pr.empty()) return p;
  p.rec = layouts::KvRecord{layouts::find_record("v41_idx_mxfp4_68"), layouts::RecordOrder::page_segregated, kc.dim(1)};
  if ((kc.dim(1) * 68) % 512 != 0)
    bad("inputs/kv_cache", "a page stride that is a multiple of 512 bytes (B59: page_size a multiple of 128)", S(kc.dim(1) * 68) + " bytes");
  if (kc.dim(1) % p.sbk != 0) bad("inputs/kv_cache", "page_size a multiple of sparse_block_kv (" + S(p.sbk) + ")", S(kc.dim(1)));
  if (p.next_n == 2 && p.R % 2 != 0) bad("inputs/q_fp4", "an even number of rows with next_n 2 (DeepGEMM pairs queries, kBlockQ 2)", S(p.R));
  if (!pr.empty()) return p;
  p.cols = p.nsb * p.sbk;
  const std::int64_t ps = kc.dim(1), pages = kc.dim(0);
  for (std::int64_t r = 0; r < p.R; ++r) {
    const std::int64_t len = cl.int_at(r);
    if (len < 0 || len > p.maxp * ps) return bad("inputs/context_lens", "in [0, block_table columns * page_size = " + S(p.maxp * ps) + "]", "row " + S(r) + ": " + S(len)), p;
    for (std::int64_t i = 0; i * ps < len; ++i)
      if (bt.int_at(r * p.maxp + i) < 0 || bt.int_at(r * p.maxp + i) >= pages)
        return bad("inputs/block_table", "page ids in [0, " + S(pages) + ") for every page a row's context covers", "row " + S(r) + " entry " + S(i) + ": " + S(bt.int_at(r * p.maxp + i))), p;
    std::int64_t prev = -1;
    bool pad = false;
    for (std::int64_t i = 0; i < p.nsb; ++i) {
      const std::int64_t b = sb.int_at(r * p.nsb + i);
      if (b == -1) {
        pad = true;
        continue;
      }
      if (b < 0 || pad || b <= prev || b * p.sbk >= p.maxp * ps)
        return bad("inputs/sparse_blocks", "strictly increasing block ids in [0, " + S(p.maxp * ps / p.sbk) + "), then -1 padding (B59)",
                   "row " + S(r) + " entry " + S(i) + ": " + S(b) + (b >= 0 && b <= prev ? " after " + S(prev) : pad && b >= 0 ? " after -1 padding" : "")), p;
      prev = b;
    }
    if (p.next_n == 2 && r % 2 == 1)
      for (std::int64_t i = 0; i < std::max(p.nsb, p.maxp); ++i)
        if ((i < p.nsb && sb.int_at(r * p.nsb + i) != sb.int_at((r - 1) * p.nsb + i)) || (i < p.maxp && bt.int_at(r * p.maxp + i) != bt.int_at((r - 1) * p.maxp + i)))
          return bad("inputs/sparse_blocks, block_table", "identical rows for each query pair (next_n 2: DeepGEMM's kBlockQ 2)",
                     "rows " + S(r - 1) + " and " + S(r) + " differ at entry " + S(i)), p;
  }
  return p;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepGEMM's FP4 indexer logits of DeepSeek-V4.1: fp8_fp4_mqa_logits (ragged) and fp8_fp4_paged_sparse_mqa_logits (candidate blocks), MXFP4 q and k";
  s.spec = "v41 §5";
  s.formula = "logit(r, key) = sum_h w[r,h] relu(q[r,h,:] . k[key,:]) (MXFP4 q, k); ragged key = column in [ks, ke); sparse: column c = blocks[r][c / sbk] sbk + c % sbk";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = {
      bool_attr("clean_logits", true, "columns no key of the row fills (outside [ks, ke); past context_lens or in a -1 block) are -inf (true) or undefined (false)"),
      str_attr("logits_dtype", "float32", {"float32", "bf16"}, "dtype of the logits (DeepGEMM logits_dtype; bf16 weights need bf16)"),
      int_attr("sparse_block_kv", 8, "paged sparse: positions per candidate block (8 or 16)"),
      int_attr("next_n", 1, "paged sparse: query rows per request (2: row pairs share block tables and lists, DeepGEMM's kBlockQ 2)")};
  s.schema.inputs = {
      {"q_fp4", {DT::u8}, {"R,H,?"}, false, "MXFP4 queries, two e2m1 codes per byte (dim 2i low nibble) [R, H, D/2]"},
      {"q_sf", {DT::i32, DT::u8}, {"R,H", "R,H,?"}, false,
       "per (row, head) D/32 ue8m0 scale bytes: packed little-endian in an int32 [R, H] (DeepGEMM) or as bytes [R, H, D/32] (vLLM's q_scale)"},
      {"weights", {DT::f32, DT::bf16}, {"R,H"}, false, "head weights (the indexer's weights_proj output with its 2^-6 fold)"},
      {"kv_fp4", {DT::u8}, {"N,?"}, true, "ragged: MXFP4 keys [N, D/2]"},
      {"kv_sf", {DT::i32}, {"N"}, true, "ragged: per key D/32 ue8m0 bytes in an int32"},
      {"ks", {DT::i32}, {"R"}, true, "ragged: first key of each row"},
      {"ke", {DT::i32}, {"R"}, true, "ragged: one past the last key of each row"},
      {"kv_cache", {DT::u8}, {"pages,page_size,1,68", "pages,page_size,68"}, true,
       "paged: the V4.1 indexer K cache (v41_idx_mxfp4_68: per page the codes, then the scales)"},
      {"context_lens", {DT::i32}, {"R"}, true, "paged: positions each row's sequence holds"},
      {"block_table", {DT::i32}, {"R,maxp"}, true, "paged: each row's pages"},
      {"sparse_blocks", {DT::i32}, {"R,nsb"}, true, "paged: the row's candidate blocks of sparse_block_kv positions, strictly increasing, -1 padded"}};
  s.schema.outputs = {{{"logits", {DT::f32, DT::bf16}, {"R,?"}, false, "[R, N] (ragged) or [R, nsb * sparse_block_kv] (paged sparse)"},
                       CompareKind::bounded, false, true}};
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

}  // namespace dsa::v41::logits
