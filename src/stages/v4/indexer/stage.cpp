// v4.indexer: schema (npu_vllm_quant_lightning_indexer's argument names), parse, table entry.
#include <algorithm>
#include <string>

#include "stages/v4/indexer/core.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::indexer {
namespace {

const char* kName = "v4.indexer";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.k = a.i("sparse_count");
  p.cmp_ratio = a.i("cmp_ratio");
  if (a.i("sparse_mode") != 3) bad("attr sparse_mode", "3 (causal over compressed entries; the only mode the V4 backend uses)", std::to_string(a.i("sparse_mode")));
  if (p.k < 1 || p.k > 2048) bad("attr sparse_count", "1..2048 (A2/A3; 512 for V4-Flash, 1024 for V4-Pro)", std::to_string(p.k));
  if (p.cmp_ratio < 1) bad("attr cmp_ratio", ">= 1 (4 in DeepSeek-V4 C4 layers)", std::to_string(p.cmp_ratio));
  const Tensor& q = c.input("query");
  const Tensor& key = c.input("key");
  const Tensor& bt = c.input("block_table");
  const Tensor& aq = c.input("actual_seq_lengths_query");
  const Tensor& ak = c.input("actual_seq_lengths_key");
  p.T = q.dim(0), p.H = q.dim(1), p.D = q.dim(2);
  p.nblk = key.dim(0), p.bs = key.dim(1), p.maxblk = bt.dim(1), p.B = bt.dim(0);
  if (key.dim(-1) != p.D) bad("inputs/key", "last dim = the query's head dim " + std::to_string(p.D), std::to_string(key.dim(-1)));
  if (key.rank() == 4 && key.dim(2) != 1) bad("inputs/key", "PA_BSND with N = 1 (one shared key head)", "N = " + std::to_string(key.dim(2)));
  if (p.D < 1 || p.D > (1 << 16)) bad("inputs/query", "head dim 1..65536 (int32 dot products stay exact)", std::to_string(p.D));
  if (p.bs < 1) bad("inputs/key", "block size >= 1 (a multiple of 16 on A3)", std::to_string(p.bs));
  if (aq.numel() != p.B || ak.numel() != p.B)
    bad("inputs/actual_seq_lengths_query, inputs/actual_seq_lengths_key", "B = " + std::to_string(p.B) + " entries (block_table rows)",
        std::to_string(aq.numel()) + " and " + std::to_string(ak.numel()));
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("sparse_indices"); it != g->end() && it->second.dim(-1) < p.k)
      bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/sparse_indices", "last dim >= sparse_count = " + std::to_string(p.k),
          std::to_string(it->second.dim(-1)));
  if (!pr.empty()) return p;
  // Requests: prefix sums without the leading 0, ending at T; each request's visible entries inside its blocks.
  std::int64_t prev = 0;
  for (std::int64_t b = 0; b < p.B; ++b) {
    const std::int64_t end = aq.int_at(b), kv = ak.int_at(b);
    if (end < prev || end > p.T) {
      bad("inputs/actual_seq_lengths_query", "non-decreasing prefix sums (no leading 0) within T = " + std::to_string(p.T),
          "request " + std::to_string(b) + ": " + std::to_string(end) + " after " + std::to_string(prev));
      return p;
    }
    if (kv < 0 || kv > (std::int64_t{1} << 40)) {
      bad("inputs/actual_seq_lengths_key", "uncompressed token counts in 0..2^40", "request " + std::to_string(b) + ": " + std::to_string(kv));
      return p;
    }
    const std::int64_t nv = kv / p.cmp_ratio;  // the request's last row (position kv - 1) sees kv / r entries
    if (end > prev) p.max_nvis = std::max(p.max_nvis, nv);
    const std::int64_t blocks = (nv + p.bs - 1) / p.bs;
    if (end > prev && blocks > p.maxblk) {
      bad("inputs/block_table", "at least ceil(nvis / block size) = " + std::to_string(blocks) + " blocks for request " + std::to_string(b) +
                                    " (" + std::to_string(nv) + " visible entries)",
          std::to_string(p.maxblk) + " columns");
      return p;
    }
    for (std::int64_t j = 0; end > prev && j < blocks; ++j)
      if (const std::int64_t id = bt.int_at(b * p.maxblk + j); id < 0 || id >= p.nblk) {
        bad("inputs/block_table", "block ids in [0, " + std::to_string(p.nblk) + ") for the blocks a request reads",
            "request " + std::to_string(b) + " block " + std::to_string(j) + ": " + std::to_string(id));
        return p;
      }
    prev = end;
  }
  if (prev != p.T)
    bad("inputs/actual_seq_lengths_query", "last prefix sum = T = " + std::to_string(p.T) + " (query rows)", std::to_string(prev));
  check_reference_memory(c, 16.0 * static_cast<double>(p.T) * static_cast<double>(std::max<std::int64_t>(p.max_nvis, 1)) +
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
  s.pipeline_order = 120;
  s.schema.attrs = {int_attr("sparse_count", 512, "k: indices per query row (512 V4-Flash, 1024 V4-Pro)"),
                    int_attr("cmp_ratio", 4, "tokens per compressed entry: entry j is visible from position 4j+3 on"),
                    int_attr("sparse_mode", 3, "3 = causal over compressed entries (the only mode supported)"),
                    str_attr("layout_query", "TND", {"TND"}, "query layout (requests packed)"),
                    str_attr("layout_key", "PA_BSND", {"PA_BSND"}, "paged key cache [block, slot, 1, D]"),
                    str_attr("variant", "ascend-a3", {"ascend-a3"},
                             "ascend-a3: int8 q/k, wq = fp16(w16 qs16), s = fp16(relu(I) 2^-10), fp32 head sums (order "
                             "unknown: bounded), fp32 x fp16 key scale")};
  s.schema.inputs = {
      {"query", {DT::int8}, {"T,H,D"}, false, "int8 query codes (dynamic_quant_int8 per (token, head))"},
      {"query_dequant_scale", {DT::fp16}, {"T,H"}, false, "qs16: fp16 per (token, head)"},
      {"weights", {DT::fp16}, {"T,H"}, false, "w16: head weights fp16(bf16(w) * 0.011048543456039806)"},
      {"key", {DT::int8}, {"nblk,bs,1,D", "nblk,bs,D"}, false, "int8 key cache (PA_BSND)"},
      {"key_dequant_scale", {DT::fp16}, {"nblk,bs,1,1", "nblk,bs,1", "nblk,bs"}, false, "ks16: fp16 per cached key"},
      {"block_table", {DT::i32}, {"B,maxblk"}, false, "key cache blocks per request"},
      {"actual_seq_lengths_query", {DT::i32, DT::i64}, {"B"}, false, "query rows: prefix sums without the leading 0"},
      {"actual_seq_lengths_key", {DT::i32, DT::i64}, {"B"}, false, "uncompressed tokens per request (seq_lens)"}};
  s.schema.outputs = {{{"sparse_indices", {DT::i32, DT::i64}, {"T,1,?", "T,?"}, false,
                        "top sparse_count compressed-entry indices per row, descending score, -1 padded"},
                       CompareKind::topk_set}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::v4::indexer
