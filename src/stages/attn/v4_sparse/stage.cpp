// attn.v4_sparse: schema (npu_sparse_attn_sharedkv's argument names), parse, input-structure findings, table entry.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <string>

#include "engines/sparse_attn/softmax_scale.hpp"
#include "profiles/profiles.hpp"
#include "stages/attn/table.hpp"
#include "stages/attn/v4_sparse/stage.hpp"

namespace dsa::attn::v4_sparse {
namespace {

using i64 = std::int64_t;
const char* kName = "attn.v4_sparse";

// Block ids of the blocks [first_block, last_block] of request b's table row: in [0, nb) (the blocks a row reads).
bool check_blocks(const Case& c, const std::string& table, i64 b, i64 first, i64 last, i64 mb, i64 nb, i64 bs,
                  const std::string& what, std::vector<Problem>& pr) {
  const Tensor& bt = c.input(table);
  if (last >= mb) {
    pr.push_back({c.file, c.name, "inputs/" + table,
                  "at least " + std::to_string(last + 1) + " columns for request " + std::to_string(b) + " (" + what +
                      " up to " + std::to_string((last + 1) * bs - 1) + " at block size " + std::to_string(bs) + ")",
                  std::to_string(mb) + " columns"});
    return false;
  }
  for (i64 j = std::max<i64>(first, 0); j <= last; ++j)
    if (const i64 id = bt.int_at(b * mb + j); id < 0 || id >= nb) {
      pr.push_back({c.file, c.name, "inputs/" + table, "block ids in [0, " + std::to_string(nb) + ") for the blocks a request reads",
                    "request " + std::to_string(b) + " column " + std::to_string(j) + " (" + what + "): " + std::to_string(id)});
      return false;
    }
  return true;
}

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.variant = a.profile() == &profiles::flashmla_sm90() ? Variant::flashmla_sm90 : Variant::ascend_a3;
  // The V4 attention's scale is head_dim^-0.5 (the model's softmax_scale; vLLM-Ascend and FlashMLA pass it): derived
  // from q's head dim when the case does not carry it.
  p.scale = sparse_attn::softmax_scale(c, a, sparse_attn::inv_sqrt(c.input("q").dim(2)), "head_dim^-0.5", pr);
  p.win_left = a.i("ori_win_left");
  p.win_right = a.i("ori_win_right");
  p.ratio = a.i("cmp_ratio");
  if (a.i("ori_mask_mode") != 4) bad("attr ori_mask_mode", "4 (sliding window; the only mode the V4 backend uses)", std::to_string(a.i("ori_mask_mode")));
  if (a.i("cmp_mask_mode") != 3) bad("attr cmp_mask_mode", "3 (causal over compressed entries)", std::to_string(a.i("cmp_mask_mode")));
  if (p.win_left < 0 || p.win_left > (i64{1} << 20))
    bad("attr ori_win_left", "0..2^20 (window - 1 = 127 in DeepSeek-V4)", std::to_string(p.win_left));
  if (p.win_right < 0 || p.win_right > (i64{1} << 20)) bad("attr ori_win_right", "0..2^20 (0 in DeepSeek-V4)", std::to_string(p.win_right));
  if (a.i("topk_source_layer") >= 0 && p.ratio != 4)
    bad("attr topk_source_layer", "-1 unless cmp_ratio = 4 (only C4 layers have top-k indices to reuse)", std::to_string(a.i("topk_source_layer")));
  if (a.i("topk_source_offset") < 0) bad("attr topk_source_offset", ">= 0", std::to_string(a.i("topk_source_offset")));
  if (p.ratio != 1 && p.ratio != 4 && p.ratio != 128)
    bad("attr cmp_ratio", "1 (SWA-only layer), 4 (C4, with cmp_sparse_indices) or 128 (C128)", std::to_string(p.ratio));
  const Tensor& q = c.input("q");
  const Tensor& okv = c.input("ori_kv");
  const Tensor* ckv = c.input_opt("cmp_kv");
  const Tensor* cbt = c.input_opt("cmp_block_table");
  const Tensor* idx = c.input_opt("cmp_sparse_indices");
  p.T = q.dim(0), p.N = q.dim(1), p.D = q.dim(2);
  p.nb_o = okv.dim(0), p.bs_o = okv.dim(1), p.mb_o = c.input("ori_block_table").dim(1);
  p.B = c.input("ori_block_table").dim(0);
  if (p.D % 8 != 0) bad("inputs/q", "head dim a multiple of 8 (512 in DeepSeek-V4)", std::to_string(p.D));
  if (p.bs_o < 1) bad("inputs/ori_kv", "block size >= 1 (a multiple of 16, <= 1024 on A2/A3)", std::to_string(p.bs_o));
  if (p.ratio == 1 && (ckv || cbt || idx))
    bad(ckv ? "inputs/cmp_kv" : cbt ? "inputs/cmp_block_table" : "inputs/cmp_sparse_indices", "absent with cmp_ratio = 1 (SWA-only layer)", "present");
  if (p.ratio > 1 && (!ckv || !cbt))
    bad(!ckv ? "inputs/cmp_kv" : "inputs/cmp_block_table", "present with cmp_ratio = " + std::to_string(p.ratio), "absent");
  if (p.ratio == 4 && !idx) bad("inputs/cmp_sparse_indices", "present with cmp_ratio = 4 (the QLI's top-k entries)", "absent");
  if (p.ratio == 128 && idx) bad("inputs/cmp_sparse_indices", "absent with cmp_ratio = 128 (every complete entry is attended)", "present");
  if (ckv) {
    p.nb_c = ckv->dim(0), p.bs_c = ckv->dim(1);
    if (p.bs_c < 1) bad("inputs/cmp_kv", "block size >= 1 (a multiple of 16, <= 1024 on A2/A3)", std::to_string(p.bs_c));
  }
  if (cbt) {
    p.mb_c = cbt->dim(1);
    if (cbt->dim(0) != p.B) bad("inputs/cmp_block_table", "B = " + std::to_string(p.B) + " rows (ori_block_table's)", std::to_string(cbt->dim(0)));
  }
  if (idx) p.K = idx->dim(2);
  if (!pr.empty()) return p;
  // Requests: cu_seqlens_q [B+1] from 0 to T, non-decreasing; seqused_kv [B] >= 0; the blocks each request reads.
  const Tensor& cu = c.input("cu_seqlens_q");
  const Tensor& kvl = c.input("seqused_kv");
  if (cu.numel() != p.B + 1 || kvl.numel() != p.B) {
    bad("inputs/cu_seqlens_q, inputs/seqused_kv", "B + 1 = " + std::to_string(p.B + 1) + " and B entries (ori_block_table rows)",
        std::to_string(cu.numel()) + " and " + std::to_string(kvl.numel()));
    return p;
  }
  if (cu.int_at(0) != 0) {
    bad("inputs/cu_seqlens_q", "0 first (prefix sums with the leading 0)", std::to_string(cu.int_at(0)));
    return p;
  }
  auto rows = std::make_shared<std::vector<Row>>(static_cast<std::size_t>(p.T));
  i64 nmax = 0;
  for (i64 b = 0; b < p.B; ++b) {
    const i64 s0 = cu.int_at(b), s1 = cu.int_at(b + 1), kv = kvl.int_at(b);
    if (s1 < s0 || s1 > p.T) {
      bad("inputs/cu_seqlens_q", "non-decreasing prefix sums within the " + std::to_string(p.T) + " query rows",
          "request " + std::to_string(b) + ": " + std::to_string(s1) + " after " + std::to_string(s0));
      return p;
    }
    if (kv < 0 || kv > (i64{1} << 40)) {
      bad("inputs/seqused_kv", "token counts in 0..2^40", "request " + std::to_string(b) + ": " + std::to_string(kv));
      return p;
    }
    const i64 qlen = s1 - s0;
    for (i64 i = 0; i < qlen; ++i) (*rows)[static_cast<std::size_t>(s0 + i)] = {b, kv - qlen + i};
    if (qlen == 0) continue;
    const i64 p_first = kv - qlen, p_last = kv - 1;  // the request's first and last row positions
    if (p_last >= 0) {
      const i64 lo = std::max<i64>(0, p_first - p.win_left);
      if (!check_blocks(c, "ori_block_table", b, lo / p.bs_o, p_last / p.bs_o, p.mb_o, p.nb_o, p.bs_o, "window positions", pr)) return p;
    }
    const i64 lim = p.ratio > 1 && p_last >= 0 ? (p_last + 1) / p.ratio : 0;  // the last row's limit
    if (p.ratio == 128 && lim > 0 && !check_blocks(c, "cmp_block_table", b, 0, (lim - 1) / p.bs_c, p.mb_c, p.nb_c, p.bs_c, "compressed entries", pr))
      return p;
    nmax = std::max(nmax, std::min(p.win_left + p.win_right + 1, std::max<i64>(kv, 0)) + (p.ratio == 128 ? lim : std::min(p.K, lim)));
  }
  if (cu.int_at(p.B) != p.T) {
    bad("inputs/cu_seqlens_q", "last entry = T = " + std::to_string(p.T) + " query rows", std::to_string(cu.int_at(p.B)));
    return p;
  }
  // C4 lists: the slots [0, min(K, limit)) up to the first -1 must be distinct entries in [0, limit), each mapped.
  // O(K log K) per row; messages are built only on a failure.
  if (idx) {
    std::vector<i64> sorted;
    for (i64 t = 0; t < p.T; ++t) {
      const Row& r = (*rows)[static_cast<std::size_t>(t)];
      const i64 lim = r.pos + 1 > 0 ? (r.pos + 1) / p.ratio : 0, width = std::min(p.K, lim);
      auto at = [&](i64 k) {
        return "row " + std::to_string(t) + " (request " + std::to_string(r.b) + ", position " + std::to_string(r.pos) + ") slot " + std::to_string(k);
      };
      sorted.clear();
      for (i64 k = 0; k < width; ++k) {
        const i64 j = idx->int_at(t * p.K + k);
        if (j == -1) break;
        if (j < 0 || j >= lim) {
          bad("inputs/cmp_sparse_indices",
              "entries in [0, (p+1)//" + std::to_string(p.ratio) + " = " + std::to_string(lim) +
                  ") before the first -1 (the kernel's result is undefined otherwise, spec v4 §4.2)",
              at(k) + ": " + std::to_string(j));
          return p;
        }
        const i64 col = j / p.bs_c, id = col < p.mb_c ? cbt->int_at(r.b * p.mb_c + col) : -1;
        if ((id < 0 || id >= p.nb_c) &&
            !check_blocks(c, "cmp_block_table", r.b, col, col, p.mb_c, p.nb_c, p.bs_c, "compressed entry " + std::to_string(j), pr))
          return p;
        sorted.push_back(j);
      }
      std::sort(sorted.begin(), sorted.end());
      if (auto d = std::adjacent_find(sorted.begin(), sorted.end()); d != sorted.end()) {
        i64 k = 0, seen = 0;
        for (; k < width && seen < 2; ++k) seen += idx->int_at(t * p.K + k) == *d;
        bad("inputs/cmp_sparse_indices", "distinct entries before the first -1 (a repeated entry is undefined in the kernel)",
            at(k - 1) + ": entry " + std::to_string(*d) + " repeated");
        return p;
      }
    }
  }
  p.rows = rows;
  // Work: QK, PV and the bound's |P| V per key of every row.
  double keys = 0;
  for (i64 t = 0; t < p.T; ++t) {
    const Row& r = (*rows)[static_cast<std::size_t>(t)];
    if (r.pos < 0) continue;
    const i64 kv = kvl.int_at(r.b), lim = p.ratio > 1 ? (r.pos + 1) / p.ratio : 0;
    keys += static_cast<double>(std::min(r.pos + p.win_right, kv - 1) - std::max<i64>(0, r.pos - p.win_left) + 1);
    keys += static_cast<double>(p.ratio == 128 ? lim : std::min(p.K, lim));
  }
  if (!check_reference_work(c, 3.0 * keys * static_cast<double>(p.N * p.D), "inputs/seqused_kv, attr ori_win_left, the keys of every row", pr))
    return p;
  const double thr = static_cast<double>(omp_get_max_threads()), n8 = static_cast<double>(nmax + 8), D = static_cast<double>(p.D);
  const double H = static_cast<double>(p.N);
  check_reference_memory(c, static_cast<double>(p.T) * H * D * 10.0 + thr * (8.0 * n8 * (3.0 * D + 64) + 8.0 * (H + 4) * (D * 3 + 8)),
                         "inputs/q, the longest row's keys", pr);
  return p;
}

// Notes on the input's structure: what the A2/A3 kernel requires (spec v4 §5) and C4 lists shorter than the kernel's
// column count min(K, limit) (the README's "only safe" case, spec §4.2).
void sanity(const Case& c, const std::string& tensor, const Tensor&, std::vector<std::string>& f) {
  if (tensor != "out") return;
  const i64 N = c.input("q").dim(1), D = c.input("q").dim(2);
  if (N != 64) f.push_back("N = " + std::to_string(N) + " query heads: npu_sparse_attn_sharedkv (TND) requires 64");
  if (D != 512) f.push_back("head dim " + std::to_string(D) + ": npu_sparse_attn_sharedkv requires 512");
  for (const char* n : {"ori_kv", "cmp_kv"})
    if (const Tensor* kv = c.input_opt(n); kv && (kv->dim(1) % 16 != 0 || kv->dim(1) > 1024))
      f.push_back(std::string(n) + " block size " + std::to_string(kv->dim(1)) + ": the kernel requires a multiple of 16, <= 1024");
  const Tensor* idx = c.input_opt("cmp_sparse_indices");
  if (!idx) return;
  if (idx->dim(2) != 512) f.push_back("cmp_sparse_indices width " + std::to_string(idx->dim(2)) + ": the A2/A3 kernel supports 512 (K2) only");
  const Tensor& cu = c.input("cu_seqlens_q");
  const Tensor& kvl = c.input("seqused_kv");
  const i64 K = idx->dim(2), r = c.has_attr("cmp_ratio") ? attr_as_int(c, "cmp_ratio", c.attrs.at("cmp_ratio")) : 1;
  i64 shorter = 0, first = -1;
  for (i64 b = 0; b + 1 < cu.numel() && r > 0; ++b)
    for (i64 t = cu.int_at(b); t < cu.int_at(b + 1) && t < idx->dim(0); ++t) {
      const i64 pos = kvl.int_at(b) - (cu.int_at(b + 1) - cu.int_at(b)) + (t - cu.int_at(b));
      const i64 width = std::min(K, pos + 1 > 0 ? (pos + 1) / r : 0);
      i64 n = 0;
      while (n < width && idx->int_at(t * K + n) != -1) ++n;
      if (n < width) {
        ++shorter;
        if (first < 0) first = t;
      }
    }
  if (shorter)
    f.push_back(std::to_string(shorter) + " row(s) (first: row " + std::to_string(first) +
                ") list fewer valid entries than the kernel's column count min(K, (p+1)//r): the QLI never emits such "
                "lists and the kernel's behaviour there is not documented (spec v4 §4.2); judged on the listed entries");
}

// IndexCache (seed 004 skip_topk): an attn.v4_sparse case of a layer that reuses the top-k of an indexer-bearing layer
// (attr topk_source_layer) must attend exactly the indices that layer's v4.indexer case (attr layer, same attr step)
// produced, rows [topk_source_offset, +T) of its sparse_indices (the prefill segment sits at num_decode_tokens, the
// decode segment at 0). Pairs whose source is not among the files read are not judged.
std::vector<cmp::CheckResult> index_cache(const std::vector<const Case*>& cases) {
  auto str = [](const Case* c, const char* k) { return c->has_attr(k) ? attr_to_string(c->attrs.at(k)) : std::string(); };
  std::map<std::pair<std::string, std::string>, std::vector<const Case*>> src;
  for (const Case* c : cases)
    if (c->stage == "v4.indexer" && c->has_attr("layer") && c->outputs.count("sparse_indices"))
      src[{str(c, "layer"), str(c, "step")}].push_back(c);
  std::vector<cmp::CheckResult> out;
  for (const Case* c : cases) {
    if (c->stage != kName || !c->has_attr("topk_source_layer") || !c->input_opt("cmp_sparse_indices")) continue;
    const i64 ls = attr_as_int(*c, "topk_source_layer", c->attrs.at("topk_source_layer"));
    if (ls < 0) continue;
    const i64 off = c->has_attr("topk_source_offset") ? attr_as_int(*c, "topk_source_offset", c->attrs.at("topk_source_offset")) : 0;
    auto it = src.find({std::to_string(ls), str(c, "step")});
    if (it == src.end()) continue;
    const Tensor& a = c->input("cmp_sparse_indices");
    const i64 T = a.dim(0), K = a.dim(2);
    const std::string me = "layer " + (c->has_attr("layer") ? str(c, "layer") : std::string("?")) + " (case '" + c->name + "')";
    cmp::CheckResult r;
    r.file = c->file, r.case_name = c->name, r.stage = kName, r.group = "consistency", r.tensor = "cmp_sparse_indices";
    r.step = str(c, "step");
    r.kind = CompareKind::bytes;
    r.numel = T * K;
    const Case* s = nullptr;
    for (const Case* x : it->second)
      if (x->outputs.at("sparse_indices").dim(0) >= off + T) s = x;
    if (!s) {
      r.verdict = cmp::Verdict::STRUCTURE;
      r.message = "IndexCache: " + me + " reuses the top-k of layer " + std::to_string(ls) + ", whose v4.indexer case(s) hold fewer than " +
                  "topk_source_offset + T = " + std::to_string(off + T) + " rows";
      out.push_back(std::move(r));
      continue;
    }
    const Tensor& b = s->outputs.at("sparse_indices");
    const i64 Ks = b.dim(-1);
    const std::string them = "layer " + std::to_string(ls) + "'s indexer (case '" + s->name + "'" + (s->file != c->file ? " in " + s->file : "") + ")";
    if (Ks != K) {
      r.verdict = cmp::Verdict::STRUCTURE;
      r.message = "IndexCache: " + me + " attends " + std::to_string(K) + " entries per row, " + them + " produced " + std::to_string(Ks);
      out.push_back(std::move(r));
      continue;
    }
    std::string first;
    for (i64 t = 0; t < T; ++t)
      for (i64 k = 0; k < K; ++k)
        if (a.int_at(t * K + k) != b.int_at((off + t) * K + k) && r.mismatches++ == 0)
          first = "row " + std::to_string(t) + " slot " + std::to_string(k) + ": " + me + " attends entry " + std::to_string(a.int_at(t * K + k)) +
                  ", " + them + " row " + std::to_string(off + t) + " produced " + std::to_string(b.int_at((off + t) * K + k));
    r.verdict = r.mismatches ? cmp::Verdict::FAIL : cmp::Verdict::BITEXACT;
    r.message = r.mismatches ? "IndexCache: " + std::to_string(r.mismatches) + " of " + std::to_string(T * K) +
                                   " reused indices differ from the source layer's; first: " + first
                             : "IndexCache: " + me + " attends exactly the " + std::to_string(T) + " rows " + them + " produced (from row " +
                                   std::to_string(off) + ")";
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4 sparse attention (npu_sparse_attn_sharedkv): sliding window + compressed KV + sinks, bf16 out";
  s.spec = "v4 §4.2-4.3, §5";
  s.formula = "keys = window positions [p - ori_win_left, p] of ori_kv, then compressed entries j < (p+1) // cmp_ratio (C4: the listed cmp_sparse_indices); out[t,h,:] = sum_k softmax(softmax_scale q[t,h,:] . key_k) key_k (x 1/(1+e^(sink_h - lse))), bf16";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = sparse_attn::softmax_scale_attrs(
      "score scale; absent: head_dim^-0.5 of q (512^-0.5 = 0.04419417382415922 in DeepSeek-V4)");
  for (auto& x : std::vector<AttrSpec>{
      int_attr("cmp_ratio", 1, "1: SWA-only layer (no cmp_kv); 4: C4 (cmp_sparse_indices from the QLI); 128: C128 (all entries)"),
      int_attr("ori_win_left", 127, "window tokens before the query position (sliding_window - 1)"),
      int_attr("ori_win_right", 0, "window tokens after the query position"),
      int_attr("ori_mask_mode", 4, "4 = sliding window (the only mode the V4 backend uses)"),
      int_attr("cmp_mask_mode", 3, "3 = causal over compressed entries: j < (p+1) // cmp_ratio"),
      str_attr("layout_q", "TND", {"TND"}, "query layout (requests packed, cu_seqlens_q)"),
      str_attr("layout_kv", "PA_ND", {"PA_ND"}, "paged caches [block, slot, 1, D] read through block tables"),
      int_attr("topk_source_layer", -1,
               "IndexCache (seed 004 skip_topk): the indexer-bearing layer whose top-k this layer reuses (-1: its own); "
               "check compares cmp_sparse_indices with that layer's v4.indexer output (attr layer, same attr step)"),
      int_attr("topk_source_offset", 0, "IndexCache: the first row of the source's indices (the prefill segment: num_decode_tokens)")})
    s.schema.attrs.push_back(x);
  s.default_profile = "ascend-a3";
  s.profile_doc = "the kernel arithmetic the bound covers: ascend-a3 (running max from the sink, l from 1, fp32 cube, P bf16 "
                  "CAST_ROUND, >= 16-key tiles); flashmla-sm90 (bf16 WGMMA, ex2.approx, P bf16, the sink factor at the end)";
  s.schema.inputs = {
      {"q", {DT::bf16}, {"T,N,D"}, false, "queries (TND), after the per-head RMS norm and RoPE"},
      {"ori_kv", {DT::bf16}, {"nb_o,bs_o,1,D"}, false, "sliding-window (SWA) cache, PA_ND: raw tokens, K = V"},
      {"ori_block_table", {DT::i32}, {"B,mb_o"}, false, "SWA cache blocks per request (position s at block s // bs_o)"},
      {"cu_seqlens_q", {DT::i32, DT::i64}, {"?"}, false, "query rows per request: prefix sums with the leading 0 (B + 1)"},
      {"seqused_kv", {DT::i32, DT::i64}, {"B"}, false, "tokens per request including this step (kv_len)"},
      {"sinks", {DT::f32}, {"N"}, true, "attn_sink per head: e^sink in the softmax denominator only"},
      {"cmp_kv", {DT::bf16}, {"nb_c,bs_c,1,D"}, true, "compressed KV cache (C4 / C128 layers), PA_ND: one row per entry"},
      {"cmp_block_table", {DT::i32}, {"B,mb_c"}, true, "compressed cache blocks per request (entry j at block j // bs_c)"},
      {"cmp_sparse_indices", {DT::i32, DT::i64}, {"T,1,K"}, true,
       "C4: the QLI's per-request entry indices per row (valid first, then -1)"}};
  s.schema.outputs = {{{"out", {DT::bf16}, {"T,N,D"}, false, "attention output (before the inverse RoPE and o-projection)"},
                       CompareKind::bounded}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.cross_check = index_cache;
  s.cross_attrs = {"topk_source_layer", "layer"};
  // Known bugs as values: a failing out is tested against kernels with these selections (hints, never verdicts).
  for (const auto& [bug, id, doc] : std::vector<std::tuple<Bug, const char*, const char*>>{
           {Bug::window_without_current, "B16 window end", "the window [p - 127, p - 1] without the current token"},
           {Bug::window_one_wider, "B16 window start", "a window one token wider, from p - 128"},
           {Bug::no_window, "B16", "no sliding-window keys"},
           {Bug::cmp_one_group_early, "B15", "compressed entries visible one group early, (p+2)//r"},
           {Bug::no_cmp, "v4 §4.2 compressed scope", "no compressed keys"},
           {Bug::chunk_position, "B19", "positions counted from the chunk's first row (kv_len - q_len missing)"},
           {Bug::sink_dropped, "B35 sink", "the sinks not applied"},
           {Bug::sink_in_numerator, "B35 sink numerator", "the sink as a key with an all-ones value"}})
    s.hypotheses.push_back({"out", id, doc, [b = bug](const Case& c, const dsa::Params& pb, std::int64_t f) {  // clang-14: no
                              return element(c, static_cast<const Params&>(pb), b, f);                   // binding capture
                            },
                            {}});
  s.cross_with = {"v4.indexer"};
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::attn::v4_sparse
