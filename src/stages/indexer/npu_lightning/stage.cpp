// indexer.npu_lightning: schema (torch_npu.npu_lightning_indexer's argument names), parse, the CP-metadata note,
// table entry.
#include <algorithm>
#include <string>

#include "profiles/profiles.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::npu_lightning {
namespace {

namespace li = engines::ascend_li;

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  li::Geometry& g = p.g;
  p.k = a.i("sparse_count");
  g.cmp_ratio = a.i("cmp_ratio");
  p.cp = a.s("cp_split") == "prev_next";
  p.a950 = a.profile() == &profiles::ascend_950();
  if (a.i("sparse_mode") != 3) bad("attr sparse_mode", "3 (causal; the mode the DSA backends use)", std::to_string(a.i("sparse_mode")));
  if (p.k < 1 || p.k > 2048) bad("attr sparse_count", "1..2048 (2048 for DeepSeek-V3.2)", std::to_string(p.k));
  if (g.cmp_ratio < 1) bad("attr cmp_ratio", ">= 1 (1 for DeepSeek-V3.2)", std::to_string(g.cmp_ratio));
  const Tensor& q = c.input("query");
  const Tensor& key = c.input("key");
  const Tensor& bt = c.input("block_table");
  p.T = q.dim(0), p.H = q.dim(1), p.D = q.dim(2);
  g.nblk = key.dim(0), g.bs = key.dim(1), g.maxblk = bt.dim(1), g.B = bt.dim(0);
  if (key.dtype() != q.dtype())
    bad("inputs/key", "the query's dtype " + std::string(dtype_name(q.dtype())) + " (the op takes q and k of one dtype)",
        std::string(dtype_name(key.dtype())));
  if (key.dim(-1) != p.D) bad("inputs/key", "last dim = the query's head dim " + std::to_string(p.D), std::to_string(key.dim(-1)));
  if (key.rank() == 4 && key.dim(2) != 1) bad("inputs/key", "PA_BSND with N = 1 (one shared key head)", "N = " + std::to_string(key.dim(2)));
  if (g.bs < 1) bad("inputs/key", "block size >= 1 (a multiple of 16 on A2/A3)", std::to_string(g.bs));
  const bool next_q = c.input_opt("actual_seq_lengths_query_next") != nullptr, next_k = c.input_opt("actual_seq_lengths_key_next") != nullptr;
  if (p.cp && (!next_q || !next_k))
    bad("inputs/actual_seq_lengths_query_next, inputs/actual_seq_lengths_key_next", "both with cp_split=prev_next (the second half's call)",
        std::string(!next_q ? "no actual_seq_lengths_query_next" : "no actual_seq_lengths_key_next"));
  if (!p.cp && (next_q || next_k))
    bad("attr cp_split", "prev_next when the *_next metadata of a context-parallel split is given", "none");
  li::check_width(c, "sparse_indices", p.k, pr);
  if (!pr.empty()) return p;
  for (const auto& call : calls_of(p))
    if (!li::parse_call(c, call, g, pr)) return p;
  // The rows' own positions (provenance): the keys they make visible must lie inside the request's blocks.
  if (const Tensor* pos = c.input_opt("positions")) {
    const auto rows = rows_of(c, p, false);
    for (std::int64_t t = 0; t < p.T; ++t) {
      const std::int64_t x = pos->int_at(t), nv = (x + 1) / g.cmp_ratio, b = rows[static_cast<std::size_t>(t)].b;
      const std::int64_t blocks = (nv + g.bs - 1) / g.bs;
      if (x < 0 || x >= (std::int64_t{1} << 40)) {
        bad("inputs/positions", "positions in 0..2^40", "row " + std::to_string(t) + ": " + std::to_string(x));
        return p;
      }
      bool ok = blocks <= g.maxblk;
      for (std::int64_t j = 0; ok && j < blocks; ++j) ok = bt.int_at(b * g.maxblk + j) >= 0 && bt.int_at(b * g.maxblk + j) < g.nblk;
      if (!ok) {
        bad("inputs/positions", "positions whose " + std::to_string(nv) + " visible keys lie in valid blocks of the request's block_table row",
            "row " + std::to_string(t) + " (request " + std::to_string(b) + ") at position " + std::to_string(x) + " needs " +
                std::to_string(blocks) + " blocks");
        return p;
      }
      g.max_nvis = std::max(g.max_nvis, nv);
    }
  }
  check_reference_memory(c, 16.0 * static_cast<double>(p.T) * static_cast<double>(std::max<std::int64_t>(g.max_nvis, 1)) +
                                4.0 * static_cast<double>(p.T * p.k) + 8.0 * static_cast<double>(p.H * p.D),
                         "scores and bounds of every visible key of every row", pr);
  return p;
}

// With inputs/positions: the rows whose metadata position differs (the first few), e.g. a CP half whose
// actual_seq_lengths_key_next holds rank-local lengths (B45).
void positions_note(const Case& c, const std::string&, const Tensor&, std::vector<std::string>& findings) {
  const Tensor* pos = c.input_opt("positions");
  if (!pos) return;
  BoundCase b;
  if (!validate_case(c, false, &b).empty() || !b.params) return;
  const auto& p = dynamic_cast<const Params&>(*b.params);
  const auto rows = rows_of(c, p, false);
  const std::int64_t half = (p.T + 1) / 2;
  std::int64_t n = 0;
  std::string first;
  for (std::int64_t t = 0; t < p.T; ++t)
    if (rows[static_cast<std::size_t>(t)].pos != pos->int_at(t) && n++ == 0)
      first = "row " + std::to_string(t) + (p.cp ? (t < half ? " (first CP half" : " (second CP half") : " (") + ", request " +
              std::to_string(rows[static_cast<std::size_t>(t)].b) + "): the metadata gives position " +
              std::to_string(rows[static_cast<std::size_t>(t)].pos) + ", inputs/positions " + std::to_string(pos->int_at(t));
  if (n > 0)
    findings.push_back(std::to_string(n) + " row(s) whose metadata (kv_len - q_len + i) disagrees with inputs/positions, first " + first +
                       " (rank-local and global lengths mixed? B45); the reference uses inputs/positions");
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = "indexer.npu_lightning";
  s.summary = "Ascend V3.2 lightning indexer (bf16 q/k PA_BSND, sparse_mode 3) and its context-parallel split: top-k keys per query";
  s.spec = "v4 §5 (npu_lightning_indexer)";
  s.formula = "sparse_indices[t, 0, :] = top sparse_count j < (p+1) // cmp_ratio of score_j = sum_h w[t,h] * relu(q[t,h,:] . k_j) (bf16/fp16 q and k), -1 padded";
  s.schema.attrs = {int_attr("sparse_count", 2048, "k: indices per query row (2048 for V3.2)"),
                    int_attr("cmp_ratio", 1, "tokens per key (1 for V3.2: key j visible from position j on)"),
                    int_attr("sparse_mode", 3, "3 = causal (the only mode supported)"),
                    str_attr("layout_query", "TND", {"TND"}, "query layout (requests packed)"),
                    str_attr("layout_key", "PA_BSND", {"PA_BSND"}, "paged key cache [block, slot, 1, D]"),
                    str_attr("cp_split", "none", {"none", "prev_next"},
                             "prev_next: the rows are two calls (do_npu_cp_balance_indexer), split at ceil(T/2), the second "
                             "with the *_next metadata")};
  s.default_profile = "ascend-a3";
  s.profile_doc = "the kernel's rounding the score bounds cover: ascend-a3 = fp32 cube dots, fp32 head sum in 16 lanes + a "
                  "4-level tree, fp32 sort key; ascend-950 = any-order head sum, bf16 sort key";
  s.schema.inputs = {
      {"query", {DT::bf16, DT::fp16}, {"T,H,D"}, false, "index query (after RoPE), TND"},
      {"key", {DT::bf16, DT::fp16}, {"nblk,bs,1,D", "nblk,bs,D"}, false, "index key cache (PA_BSND), the query's dtype"},
      {"weights", {DT::bf16, DT::fp16, DT::f32}, {"T,H"}, false, "head weights"},
      {"block_table", {DT::i32}, {"B,maxblk"}, false, "key cache blocks per request"},
      {"actual_seq_lengths_query", {DT::i32, DT::i64}, {"B"}, false, "query rows: prefix sums without the leading 0 (first CP half)"},
      {"actual_seq_lengths_key", {DT::i32, DT::i64}, {"B"}, false, "kv length per request (first CP half)"},
      {"actual_seq_lengths_query_next", {DT::i32, DT::i64}, {"B"}, true, "cp_split=prev_next: the second half's query prefix sums"},
      {"actual_seq_lengths_key_next", {DT::i32, DT::i64}, {"B"}, true, "cp_split=prev_next: the second half's kv lengths"},
      {"positions", {DT::i32, DT::i64}, {"T"}, true,
       "provenance: each row's global position (the reference then is the unsplit call at these positions)"}};
  s.schema.outputs = {{{"sparse_indices", {DT::i32, DT::i64}, {"T,1,?", "T,?"}, false,
                        "top sparse_count key indices per row (the CP halves concatenated), descending score, -1 padded"},
                       CompareKind::topk_set}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = positions_note;
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::indexer::npu_lightning
