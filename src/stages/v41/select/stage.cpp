// v41.select: schema, parse (the DeepGEMM / REF contract of the candidate lists), table entry.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stages/v41/select/stage.hpp"
#include "stages/v41/table.hpp"

namespace dsa::v41::select {
namespace {

const char* kName = "v41.select";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.k = a.i("k");
  p.window = a.i("window");
  p.block_size = a.i("block_size");
  p.topk_blocks = a.i("topk_blocks");
  p.r = a.i("cmp_ratio");
  p.publish = a.b("publish");
  p.short_rows_ref = a.has("short_rows") && a.s("short_rows") == "ref";
  p.cand_layout = a.has("scores_layout") && a.s("scores_layout") == "candidates";
  const Tensor& sc = c.input("scores");
  p.S = sc.dim(0), p.N = sc.dim(1);
  if (p.k < 1 || p.k > (1 << 20)) bad("attr k", "in [1, 2^20] (512 in DeepSeek-V4.1)", std::to_string(p.k));
  if (p.window < 0 || p.window > (std::int64_t{1} << 30)) bad("attr window", "in [0, 2^30] (the window length, 128)", std::to_string(p.window));
  if (p.block_size < 1 || p.block_size > 4096) bad("attr block_size", "in [1, 4096] (8 in DeepSeek-V4.1)", std::to_string(p.block_size));
  if (p.topk_blocks < 1 || p.topk_blocks > (1 << 20)) bad("attr topk_blocks", "in [1, 2^20] (2048 in DeepSeek-V4.1)", std::to_string(p.topk_blocks));
  if (p.r < 1 || p.r > 65536) bad("attr cmp_ratio", "in [1, 65536] (1 or 2 in DeepSeek-V4.1)", std::to_string(p.r));
  if (!pr.empty()) return p;
  const Tensor& pos = c.input("positions");
  if (p.cand_layout) {
    const Tensor* cb = c.input_opt("candidate_blocks");
    if (!cb) bad("attr scores_layout", "candidates only with input candidate_blocks (a consumer's DeepGEMM sparse logits)", "candidates");
    else if (sc.dim(1) != cb->dim(1) * p.block_size)
      bad("inputs/scores", "candidate_blocks columns * block_size = " + std::to_string(cb->dim(1) * p.block_size) + " columns (scores_layout candidates)",
          std::to_string(sc.dim(1)));
  }
  std::int64_t reach_max = 0;
  for (std::int64_t r = 0; r < p.S; ++r) {
    const std::int64_t q = pos.int_at(r);
    if (q >= (std::int64_t{1} << 40)) return bad("inputs/positions", "< 2^40", "row " + std::to_string(r) + ": " + std::to_string(q)), p;
    if (!p.cand_layout && q >= 0 && (q + 1) / p.r > p.N)
      return bad("inputs/scores", "a column for every reachable position: (positions[r] + 1) / cmp_ratio <= N = " + std::to_string(p.N),
                 "row " + std::to_string(r) + " at position " + std::to_string(q) + " reaches " + std::to_string((q + 1) / p.r)), p;
    reach_max = std::max(reach_max, q < 0 ? std::int64_t{0} : (q + 1) / p.r);
  }
  // scores_layout candidates with the REF quirk ranks every reachable position of a row (the masked ones at -inf),
  // not only the listed blocks' columns, in rows as wide as the longest (the CUDA path's key table): that work is
  // bounded here, since no input bounds it.
  if (p.cand_layout && p.short_rows_ref && reach_max > ((std::int64_t{1} << 26) / std::max<std::int64_t>(p.S, 1)))
    return bad("inputs/positions", "rows x the largest reach <= 2^26 with scores_layout candidates and short_rows ref",
               std::to_string(p.S) + " rows x " + std::to_string(reach_max)), p;
  if (const Tensor* cb = c.input_opt("candidate_blocks")) {
    if (p.publish) bad("inputs/candidate_blocks", "absent with publish = 1 (the candidate source layer scores every position)", "present");
    p.M = cb->dim(1);
    // The consumer's candidate list (DeepGEMM's sparse contract, spec v41 §5, B59): strictly increasing block ids,
    // then -1 padding.
    for (std::int64_t r = 0; r < p.S && pr.empty(); ++r) {
      std::int64_t prev = -1;
      bool pad = false;
      for (std::int64_t i = 0; i < p.M; ++i) {
        const std::int64_t b = cb->int_at(r * p.M + i);
        const std::string at = "row " + std::to_string(r) + " entry " + std::to_string(i) + ": ";
        if (b == -1) {
          pad = true;
          continue;
        }
        if (b < 0 || pad || b <= prev) {
          bad("inputs/candidate_blocks", "strictly increasing block ids >= 0, then -1 padding (unsorted or repeated lists: B59)",
              at + std::to_string(b) + (b >= 0 && b <= prev ? " after " + std::to_string(prev) : pad && b >= 0 ? " after -1 padding" : ""));
          break;
        }
        prev = b;
      }
    }
  }
  for (const auto* g : {&c.outputs, &c.expected}) {
    if (auto it = g->find("indices"); it != g->end() && it->second.rank() == 2 && it->second.dim(1) < p.k)
      bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/indices", "at least k = " + std::to_string(p.k) + " columns",
          std::to_string(it->second.dim(1)));
    if (auto it = g->find("published_blocks"); it != g->end()) {
      if (!p.publish) bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/published_blocks", "only with publish = 1", "present");
      else if (it->second.rank() == 2 && it->second.dim(1) < p.topk_blocks)
        bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/published_blocks",
            "at least topk_blocks = " + std::to_string(p.topk_blocks) + " columns", std::to_string(it->second.dim(1)));
    }
  }
  return p;
}

// Candidate reuse (spec v41 §1, §5: layers 24..36 choose inside the blocks layer 20 published): a consumer case --
// v41.select with candidate_blocks, or v41.logits's paged sparse variant with sparse_blocks -- whose attr
// candidate_source_layer names a layer must read exactly the published_blocks that layer's v41.select case (attr
// layer, publish = 1, same attr step) output, row for row (-1 padded lists: equal entries, any extra entry -1). Pairs
// whose source is not among the files read are not judged.
std::vector<cmp::CheckResult> candidate_reuse(const std::vector<const Case*>& cases) {
  auto str = [](const Case* c, const char* k) { return c->has_attr(k) ? attr_to_string(c->attrs.at(k)) : std::string(); };
  std::map<std::pair<std::string, std::string>, const Case*> src;
  for (const Case* c : cases)
    if (c->stage == kName && c->has_attr("layer") && c->outputs.count("published_blocks")) src[{str(c, "layer"), str(c, "step")}] = c;
  std::vector<cmp::CheckResult> out;
  for (const Case* c : cases) {
    const char* in = c->stage == kName ? "candidate_blocks" : c->stage == "v41.logits" ? "sparse_blocks" : nullptr;
    if (!in || !c->has_attr("candidate_source_layer") || !c->input_opt(in)) continue;
    const std::string ls = str(c, "candidate_source_layer");
    auto it = src.find({ls, str(c, "step")});
    if (it == src.end()) continue;
    const Tensor& a = c->input(in);
    const Tensor& b = it->second->outputs.at("published_blocks");
    const std::int64_t S = a.dim(0), M = a.dim(1), W = b.rank() == 2 ? b.dim(1) : 0;
    const std::string me = "layer " + (c->has_attr("layer") ? str(c, "layer") : std::string("?")) + " (case '" + c->name + "', " + c->stage + ")";
    const std::string them = "layer " + ls + "'s published_blocks (case '" + it->second->name + "'" +
                             (it->second->file != c->file ? " in " + it->second->file : "") + ")";
    cmp::CheckResult r;
    r.file = c->file, r.case_name = c->name, r.stage = c->stage, r.group = "consistency", r.tensor = in;
    r.step = str(c, "step");
    r.kind = CompareKind::bytes;
    r.numel = S * M;
    if (b.dim(0) != S) {
      r.verdict = cmp::Verdict::STRUCTURE;
      r.message = "candidate reuse: " + me + " has " + std::to_string(S) + " rows, " + them + " " + std::to_string(b.dim(0));
      out.push_back(std::move(r));
      continue;
    }
    std::string first;
    for (std::int64_t row = 0; row < S; ++row)
      for (std::int64_t i = 0; i < std::max(M, W); ++i) {
        const std::int64_t x = i < M ? a.int_at(row * M + i) : -1, y = i < W ? b.int_at(row * W + i) : -1;
        if (x != y && r.mismatches++ == 0)
          first = "row " + std::to_string(row) + " entry " + std::to_string(i) + ": " + me + " reads block " + std::to_string(x) + ", " + them +
                  " holds " + std::to_string(y);
      }
    r.verdict = r.mismatches ? cmp::Verdict::FAIL : cmp::Verdict::BITEXACT;
    r.message = r.mismatches ? "candidate reuse: " + std::to_string(r.mismatches) + " list entries differ from the source layer's; first: " + first
                             : "candidate reuse: " + me + " reads exactly the " + std::to_string(S) + " rows of " + them;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4.1 indexer selection: top-k of compressed positions in ascending order (+window, -1), two-level candidate blocks";
  s.spec = "v41 §5";
  s.formula = "indices[r] = ascending(top min(k, reach) of scores[r, j < reach] (consumers: j in a published block)) + window, -1 padded; "
              "publish: published_blocks[r] = ascending(top min(topk_blocks, nblocks) blocks by max score, newest pinned, -inf dropped)";
  s.schema.attrs = {
      int_attr("k", 512, "top-k width (index_topk)"),
      int_attr("window", 128, "added to every selected position (the compressed KV follows the sliding window)"),
      int_attr("cmp_ratio", 1, "the layer's compress ratio: position p reaches j < (p + 1) / cmp_ratio"),
      int_attr("block_size", 8, "positions per candidate block (candidate_block_size)"),
      int_attr("topk_blocks", 2048, "blocks the candidate source publishes (candidate_topk_blocks)"),
      bool_attr("publish", false, "1: the candidate source layer (also writes published_blocks)"),
      opt_str_attr("scores_layout", {"positions", "candidates"},
                   "consumers: scores[r, j] per compressed position j (positions, absent) or DeepGEMM's sparse logits, column "
                   "c = position candidate_blocks[r][c / block_size] * block_size + c % block_size (candidates)"),
      opt_str_attr("short_rows", {"pad", "ref"},
                   "a row with fewer candidates than min(k, reach): pad (default, engines) = -1; ref = the reference "
                   "model's quirk, the rest filled with reachable non-candidate positions")};
  s.schema.inputs = {
      {"scores", {D::f32, D::bf16, D::fp16}, {"S,N"}, false, "index scores per query row and compressed position (REF: bf16)"},
      {"positions", {D::i32, D::i64}, {"S"}, false, "each row's token position (-1: a padding row)"},
      {"candidate_blocks", {D::i32}, {"S,M"}, true, "consumer layers: the published block ids per row, ascending, -1 padded"}};
  s.schema.outputs = {
      {{"indices", {D::i32, D::i64}, {"S,?"}, false, "selected positions + window, ascending, -1 padded"}, CompareKind::topk_set},
      {{"published_blocks", {D::i32, D::i64}, {"S,?"}, true, "publish = 1: the published block ids, ascending, -1 padded"}, CompareKind::topk_set}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.cross_check = candidate_reuse;
  s.cross_attrs = {"candidate_source_layer", "layer"};
  s.cross_with = {"v41.logits"};
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::v41::select
