// v4.compressor: schema (the Ascend `compressor` op's TND layout), parse, findings, table entry.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "profiles/profiles.hpp"
#include "stages/v4/compressor/stage.hpp"
#include "stages/v4/table.hpp"

namespace dsa::v4::compressor {
namespace {

const char* kName = "v4.compressor";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& pr) {
  Params p;
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) { pr.push_back({c.file, c.name, t, want, found}); };
  p.r = a.i("cmp_ratio");
  p.coff = a.i("coff");
  p.rope = a.i("rope_head_dim");
  p.eps = a.f("norm_eps");
  p.rotate = a.b("rotate");
  p.cache_mode = static_cast<int>(a.i("cache_mode"));
  p.variant = a.profile() == &profiles::ref() ? Variant::ref : a.profile() == &profiles::vllm_cuda() ? Variant::vllm_cuda : Variant::ascend_a3;
  const std::string v = a.profile() ? a.profile()->name : "ascend-a3";
  p.D = c.input("norm_weight").dim(0);
  if (a.has("model")) p.v41 = a.s("model") == "v41";
  const bool x = c.input_opt("x") && c.input_opt("wkv") && (c.input_opt("wgate") || p.r == 1);
  const bool proj = c.input_opt("kv_proj") && (c.input_opt("score_proj") || p.r == 1);
  p.have_x = x;
  p.have_ape = c.input_opt("ape") != nullptr;
  p.have_gate = x ? c.input_opt("wgate") != nullptr : c.input_opt("score_proj") != nullptr;
  p.C2 = x ? c.input("wkv").dim(0) : proj ? c.input("kv_proj").dim(1) : p.coff * p.D;
  const Tensor& cu = c.input("cu_seqlens");
  const Tensor& sp = c.input("start_pos");
  const Tensor& st = c.input("state_cache_in");
  const Tensor& tab = c.input("state_block_table");
  p.B = sp.dim(0);
  p.nblk = st.dim(0), p.bs = st.dim(1), p.maxblk = tab.dim(1);
  p.R = c.input("rope_sin").dim(0);
  if (!(p.eps >= 0 && std::isfinite(p.eps))) bad("attr norm_eps", "a finite number >= 0", std::to_string(p.eps));
  if (p.r < 1 || p.r > 65536) bad("attr cmp_ratio", "in [1, 65536] (4 or 128 in DeepSeek-V4, 1 or 2 in V4.1)", std::to_string(p.r));
  if (p.coff != 1 && p.coff != 2) bad("attr coff", "1 or 2", std::to_string(p.coff));
  if (p.cache_mode != 1 && p.cache_mode != 2) bad("attr cache_mode", "1 (continuous) or 2 (cycle ring)", std::to_string(p.cache_mode));
  if (p.bs < 1) bad("inputs/state_cache_in", "dim 1 (tokens per state block) >= 1", std::to_string(p.bs));
  if (!pr.empty()) return p;  // the checks below compute with these attrs (fuzz finding: coff INT64_MIN times D)
  p.ring = p.coff * p.r;
  if (a.has("ring_rows")) {
    const std::int64_t n = a.i("ring_rows");
    if (p.cache_mode != 2) bad("attr ring_rows", "only with cache_mode 2 (the cycle ring)", "cache_mode " + std::to_string(p.cache_mode));
    else if (n < p.coff * p.r || n > (std::int64_t{1} << 20))
      bad("attr ring_rows", "in [coff * cmp_ratio = " + std::to_string(p.coff * p.r) + ", 2^20] (the window must fit in the ring)", std::to_string(n));
    else p.ring = n;
  }
  p.pooled_bf16 = a.has("pooled_bf16") ? a.b("pooled_bf16") : (p.variant == Variant::ref || (p.v41 && p.r == 1));
  if (p.v41) {
    if (p.r != 1 && p.r != 2) bad("attr cmp_ratio", "1 or 2 with model v41 (compress_ratios of DeepSeek-V4.1)", std::to_string(p.r));
    if (p.coff != 1) bad("attr coff", "1 with model v41 (no overlap)", std::to_string(p.coff));
    if (p.rotate) bad("attr rotate", "0 with model v41 (no Hadamard in V4.1)", "1");
    if (p.variant != Variant::ascend_a3 && p.D % 16 != 0)
      bad("inputs/norm_weight", "D a multiple of 16 (NVFP4 blocks) with model v41", std::to_string(p.D));
  }
  if (p.r == 1 && p.have_gate)
    bad(p.have_x ? "inputs/wgate" : "inputs/score_proj", "absent with cmp_ratio 1 (no gate: one row per entry, its weight is 1)", "present");
  if (!pr.empty()) return p;
  if (p.have_ape && c.input("ape").dim(1) != p.C2) bad("inputs/ape", "dim 1 = coff * D = " + std::to_string(p.C2), std::to_string(c.input("ape").dim(1)));
  if (p.C2 != p.coff * p.D)
    bad(x ? "inputs/wkv" : "inputs/kv_proj", std::string(x ? "dim 0" : "dim 1") + " = coff * D = " + std::to_string(p.coff * p.D), std::to_string(p.C2));
  if (st.dim(2) != 2 * p.C2) bad("inputs/state_cache_in", "dim 2 = 2 * coff * D = " + std::to_string(2 * p.C2), std::to_string(st.dim(2)));
  if (p.D % 8 != 0) bad("inputs/norm_weight", "D a multiple of 8", std::to_string(p.D));
  if (p.rope % 2 != 0 || p.rope > p.D) bad("attr rope_head_dim", "even and <= D = " + std::to_string(p.D), std::to_string(p.rope));
  if (p.rotate && p.D != 128) bad("attr rotate", "D = 128 (the indexer compressor's Hadamard-128)", "D = " + std::to_string(p.D));
  // vLLM's CUDA path dispatches on the head size (fused_compress_quant_cache.py): 512 = the main store (FP8 blocks of 64
  // over the nope dims), 128 = the indexer store (one FP8 block over all 128 dims, RoPE applied first).
  if (!p.v41 && p.variant == Variant::vllm_cuda && p.D != 128 && p.D != 512)
    bad("attr variant", "D = 512 (main compressor store) or D = 128 (indexer compressor store) with vllm-cuda", "D = " + std::to_string(p.D));
  if (!p.v41 && !p.rotate && p.variant == Variant::ref && (p.D - p.rope) % 64 != 0)
    bad("attr variant", "D - rope_head_dim a multiple of 64 (FP8 QAT blocks of the nope dims)", std::to_string(p.D - p.rope));
  if (!p.v41 && p.variant == Variant::vllm_cuda && p.D == 512 && (p.D - p.rope) % 64 != 0)
    bad("attr rope_head_dim", "D - rope_head_dim a multiple of 64 (FP8 blocks of the nope dims)", std::to_string(p.D - p.rope));
  if (!p.v41 && !p.have_ape) bad("inputs/ape", "present (DeepSeek-V4 adds the position-in-group embedding; model v41 has none)", "absent");
  if (x == proj)
    bad("inputs", std::string("either x + wkv") + (p.r == 1 ? "" : " + wgate") + " (the op's inputs) or kv_proj" + (p.r == 1 ? "" : " + score_proj") +
                      " (the per-token projections)",
        x ? "both" : "neither complete");
  p.T = x ? c.input("x").dim(0) : proj ? c.input("kv_proj").dim(0) : 0;
  p.H = x ? c.input("x").dim(1) : 0;
  if (!pr.empty()) return p;
  if (cu.numel() != p.B + 1) return bad("inputs/cu_seqlens", "B + 1 = " + std::to_string(p.B + 1) + " entries", std::to_string(cu.numel())), p;
  if (cu.int_at(0) != 0 || cu.int_at(p.B) != p.T)
    return bad("inputs/cu_seqlens", "0 first and T = " + std::to_string(p.T) + " last", std::to_string(cu.int_at(0)) + " .. " + std::to_string(cu.int_at(p.B))), p;
  std::int64_t emitted = 0;
  for (std::int64_t b = 0; b < p.B; ++b) {
    const std::int64_t q = cu.int_at(b + 1) - cu.int_at(b), s0 = sp.int_at(b);
    if (q < 0) return bad("inputs/cu_seqlens", "non-decreasing", "request " + std::to_string(b) + " has " + std::to_string(q) + " tokens"), p;
    if (s0 < 0) return bad("inputs/start_pos", ">= 0", "request " + std::to_string(b) + ": " + std::to_string(s0)), p;
    if (s0 > (std::int64_t{1} << 40))
      return bad("inputs/start_pos", "<= 2^40", "request " + std::to_string(b) + ": " + std::to_string(s0)), p;
    emitted += (s0 + q) / p.r - s0 / p.r;
    // Every slot the step writes or reads must exist in the table: the last position (continuous) or the ring.
    const std::int64_t last = p.cache_mode == 2 ? std::min(s0 + q, p.ring) - 1 : s0 + q - 1;
    if (last >= 0 && last / p.bs >= p.maxblk)
      return bad("inputs/state_block_table", "an entry for every state row the step reads or writes (" + std::to_string(p.maxblk) + " per request)",
                 "request " + std::to_string(b) + " position " + std::to_string(p.cache_mode == 2 ? last : s0 + q - 1) +
                     " needs block index " + std::to_string(last / p.bs)), p;
  }
  for (std::int64_t i = 0; i < tab.numel(); ++i)
    if (tab.int_at(i) < 0 || tab.int_at(i) >= p.nblk)
      return bad("inputs/state_block_table", "block ids in [0, nblk = " + std::to_string(p.nblk) + ") (0 = do not write)",
                 "entry " + std::to_string(i) + ": " + std::to_string(tab.int_at(i))), p;
  {
    const double T = static_cast<double>(p.T), C2 = static_cast<double>(p.C2), Hh = static_cast<double>(p.H);
    const double thr = static_cast<double>(omp_get_max_threads());
    check_reference_memory(c, 32.0 * T * C2 + 16.0 * static_cast<double>(st.numel()) + 16.0 * C2 * Hh + 11.0 * static_cast<double>(p.R * p.D) +
                                  thr * (16.0 * static_cast<double>(p.coff * p.r) * C2 + 8.0 * 64 * (Hh + 2 * C2)),
                           "inputs/x, inputs/ape, inputs/state_cache_in", pr);
  }
  if (auto it = c.attrs.find("request_ids"); it != c.attrs.end()) {
    const auto* ids = std::get_if<std::vector<std::int64_t>>(&it->second);
    if (!ids || static_cast<std::int64_t>(ids->size()) != p.B)
      bad("attr request_ids", "a list of B = " + std::to_string(p.B) + " integers (one request id per request)", attr_to_string(it->second));
  }
  if (emitted > p.R)
    bad("inputs/rope_sin", "one row per emitted entry: >= " + std::to_string(emitted) + " rows", std::to_string(p.R));
  for (const auto* g : {&c.outputs, &c.expected}) {
    auto it = g->find("state_cache");
    if (it != g->end() && it->second.shape() != st.shape())
      bad(std::string(g == &c.outputs ? "outputs" : "expected") + "/state_cache", "the shape of inputs/state_cache_in", shape_str(it->second.shape()));
  }
  return p;
}

void sanity(const Case& c, const std::string& tensor, const Tensor&, std::vector<std::string>& f) {
  if (tensor != "cmp_kv") return;
  const AttrReader a(c, find_stage(kName)->schema);
  if (a.b("rotate") && kernel_profile(c) == &profiles::vllm_cuda())
    // A fact about the case, not an explanation of a failure: main's kNotePrefix ("note: ") lists it as a note only.
    f.push_back("note: rotate = 1 is not applied: the vLLM CUDA path applies no Hadamard (the flag is stored, no kernel reads it; "
                "fused_compress_quant_cache.py quantizes the RoPE'd, normed 128 dims directly)");
  if (a.i("cache_mode") != 2) return;
  const Tensor& cu = c.input("cu_seqlens");
  const std::int64_t ring = a.has("ring_rows") ? a.i("ring_rows") : a.i("coff") * a.i("cmp_ratio");
  for (std::int64_t b = 0; b + 1 < cu.numel(); ++b)
    if (cu.int_at(b + 1) - cu.int_at(b) > ring) {
      f.push_back("request " + std::to_string(b) + " has " + std::to_string(cu.int_at(b + 1) - cu.int_at(b)) +
                  " tokens in a cycle ring of " + std::to_string(ring) +
                  ": several tokens write one state slot (the reference keeps the last token's row)");
      return;
    }
}


// Prefill == chunked == decode and batch invariance on kernel dumps: every emitted row is keyed by (attr `layer`,
// request id from attr `request_ids`, compressed index j); two rows of one key are compared only when their inputs are
// identical (window_inputs), and must then have identical bits.
//
// A row's inputs are the instance (D, ratio, overlap, rope dims, eps, rotate, numerics), the norm weight, its RoPE row
// and its window positions. A position before the call's start_pos is the fp32 state row the call reads; a position of
// the call itself is the fp32 row the kernel wrote for it into outputs/state_cache (when the call recorded it and no
// later token of the call overwrote that slot) and otherwise its source (x with wkv/wgate/ape, or kv_proj/score_proj
// with ape). Two positions are the same input when both are missing, or both have an fp32 row and the bytes agree,
// or (no fp32 row on one side) both have the same kind of source with identical bytes.
struct WinPos {
  bool missing = false;
  const float* fp32 = nullptr;  // 2 * C2 floats
  std::int64_t token = -1;      // the call's token (source row), -1 = none
};
struct CaseInfo {
  const Case* c = nullptr;
  Params p;
  std::vector<std::int64_t> last_writer;  // per token: the token that last writes its state slot in this call (-1: none)
};

std::vector<WinPos> window_inputs(const CaseInfo& ci, std::int64_t b, std::int64_t j) {
  const Case& c = *ci.c;
  const Params& p = ci.p;
  const Tensor &cu = c.input("cu_seqlens"), &sp = c.input("start_pos"), &st = c.input("state_cache_in");
  const std::int32_t* tab = c.input("state_block_table").data<std::int32_t>() + b * p.maxblk;
  const auto ot = c.outputs.find("state_cache");
  const Tensor* st_out = ot != c.outputs.end() && ot->second.shape() == st.shape() && ot->second.dtype() == DType::f32 ? &ot->second : nullptr;
  const std::int64_t s0 = sp.int_at(b), t0 = cu.int_at(b), W = 2 * p.C2;
  std::vector<WinPos> w;
  for (std::int64_t ps = j * p.r - (p.coff == 2 ? p.r : 0); ps < j * p.r + p.r; ++ps) {
    WinPos x;
    if (ps < 0) {
      x.missing = true;
    } else if (ps < s0) {
      const Slot sl = state_slot(p, tab, ps);
      x.fp32 = st.data<float>() + (std::max<std::int64_t>(sl.block, 0) * p.bs + sl.offset) * W;
    } else {
      x.token = t0 + ps - s0;
      const Slot sl = state_slot(p, tab, ps);
      if (st_out && sl.block > 0 && ci.last_writer[static_cast<std::size_t>(x.token)] == x.token)
        x.fp32 = st_out->data<float>() + (sl.block * p.bs + sl.offset) * W;
    }
    w.push_back(x);
  }
  return w;
}

bool same_bytes(const Tensor& a, std::int64_t oa, const Tensor& b, std::int64_t ob, std::int64_t n) {
  const std::size_t es = dtype_size(a.dtype());
  return a.dtype() == b.dtype() && std::memcmp(a.raw() + oa * static_cast<std::int64_t>(es), b.raw() + ob * static_cast<std::int64_t>(es), n * es) == 0;
}

// Identical inputs of row (b, j, out row) of case x and row (b', j, out row') of case y (same key).
bool same_inputs(const CaseInfo& x, std::int64_t bx, std::int64_t rx, const CaseInfo& y, std::int64_t by, std::int64_t ry, std::int64_t j) {
  const Params &p = x.p, &q = y.p;
  if (p.D != q.D || p.r != q.r || p.coff != q.coff || p.rope != q.rope || p.eps != q.eps || p.rotate != q.rotate || p.variant != q.variant ||
      p.v41 != q.v41 || p.pooled_bf16 != q.pooled_bf16 || p.have_ape != q.have_ape || p.have_gate != q.have_gate)
    return false;
  const Case &a = *x.c, &b = *y.c;
  if (!same_bytes(a.input("norm_weight"), 0, b.input("norm_weight"), 0, p.D) ||
      !same_bytes(a.input("rope_cos"), rx * p.rope, b.input("rope_cos"), ry * p.rope, p.rope) ||
      !same_bytes(a.input("rope_sin"), rx * p.rope, b.input("rope_sin"), ry * p.rope, p.rope))
    return false;
  const std::vector<WinPos> wa = window_inputs(x, bx, j), wb = window_inputs(y, by, j);
  bool weights_checked = false;
  for (std::size_t i = 0; i < wa.size(); ++i) {
    const WinPos &u = wa[i], &v = wb[i];
    if (u.missing || v.missing) {
      if (u.missing != v.missing) return false;
      continue;
    }
    if (u.fp32 && v.fp32) {
      if (std::memcmp(u.fp32, v.fp32, static_cast<std::size_t>(2 * p.C2) * sizeof(float)) != 0) return false;
      continue;
    }
    if (u.token < 0 || v.token < 0 || p.have_x != q.have_x) return false;  // a state row against a source: not comparable
    const std::int64_t ap = (j * p.r - (p.coff == 2 ? p.r : 0) + static_cast<std::int64_t>(i)) % p.r;
    if (p.have_x) {
      if (!weights_checked) {
        if (a.input("wkv").shape() != b.input("wkv").shape() || a.input("x").dim(1) != b.input("x").dim(1) ||
            !same_bytes(a.input("wkv"), 0, b.input("wkv"), 0, a.input("wkv").numel()) ||
            (p.have_gate && !same_bytes(a.input("wgate"), 0, b.input("wgate"), 0, a.input("wgate").numel())))
          return false;
        weights_checked = true;
      }
      if (!same_bytes(a.input("x"), u.token * p.H, b.input("x"), v.token * q.H, p.H)) return false;
    } else if (!same_bytes(a.input("kv_proj"), u.token * p.C2, b.input("kv_proj"), v.token * q.C2, p.C2) ||
               (p.have_gate && !same_bytes(a.input("score_proj"), u.token * p.C2, b.input("score_proj"), v.token * q.C2, p.C2))) {
      return false;
    }
    if (p.have_ape && !same_bytes(a.input("ape"), ap * p.C2, b.input("ape"), ap * q.C2, p.C2)) return false;
  }
  return true;
}

std::vector<cmp::CheckResult> cross_check(const std::vector<const Case*>& cases) {
  struct Row {
    std::size_t ci;
    std::int64_t b, row;
  };
  std::vector<CaseInfo> info;
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, std::vector<Row>> rows;
  const Schema& schema = find_stage(kName)->schema;
  for (const Case* c : cases) {
    auto it = c->attrs.find("request_ids");
    auto ot = c->outputs.find("cmp_kv");
    if (it == c->attrs.end() || ot == c->outputs.end()) continue;
    const AttrReader a(*c, schema);
    std::vector<Problem> pr;
    CaseInfo ci{c, parse(*c, a, pr), {}};
    if (!pr.empty()) continue;
    const auto& ids = std::get<std::vector<std::int64_t>>(it->second);
    const Params& p = ci.p;
    const std::string layer = c->has_attr("layer") ? attr_to_string(c->attrs.at("layer")) : "";
    const Tensor& cu = c->input("cu_seqlens");
    const Tensor& sp = c->input("start_pos");
    const std::int32_t* tab = c->input("state_block_table").data<std::int32_t>();
    ci.last_writer.assign(static_cast<std::size_t>(p.T), -1);
    std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> slot_writer;
    for (std::int64_t b = 0; b < p.B; ++b)
      for (std::int64_t t = cu.int_at(b); t < cu.int_at(b + 1); ++t) {
        const Slot sl = state_slot(p, tab + b * p.maxblk, sp.int_at(b) + t - cu.int_at(b));
        if (sl.block > 0) slot_writer[{sl.block, sl.offset}] = t;
      }
    for (std::int64_t b = 0; b < p.B; ++b)
      for (std::int64_t t = cu.int_at(b); t < cu.int_at(b + 1); ++t) {
        const Slot sl = state_slot(p, tab + b * p.maxblk, sp.int_at(b) + t - cu.int_at(b));
        if (sl.block > 0) ci.last_writer[static_cast<std::size_t>(t)] = slot_writer[{sl.block, sl.offset}];
      }
    info.push_back(std::move(ci));  // a case with provenance
    std::int64_t row = 0;
    for (std::size_t b = 0; b < ids.size(); ++b) {
      const std::int64_t s0 = sp.int_at(static_cast<std::int64_t>(b)),
                         q = cu.int_at(static_cast<std::int64_t>(b) + 1) - cu.int_at(static_cast<std::int64_t>(b));
      for (std::int64_t j = s0 / p.r; j < (s0 + q) / p.r; ++j)
        rows[{layer, ids[b], j}].push_back({info.size() - 1, static_cast<std::int64_t>(b), row++});
    }
  }
  std::string file = cases.empty() ? "" : cases.front()->file;
  std::int64_t pairs = 0, bad = 0, repeated = 0;
  std::string first;
  for (const auto& [key, v] : rows) {
    if (v.size() < 2) continue;
    repeated += static_cast<std::int64_t>(v.size()) - 1;
    // Each later row against the first earlier row with identical inputs.
    for (std::size_t i = 1; i < v.size(); ++i) {
      const CaseInfo& y = info[v[i].ci];
      for (std::size_t k = 0; k < i; ++k) {
        const CaseInfo& x = info[v[k].ci];
        if (!same_inputs(x, v[k].b, v[k].row, y, v[i].b, v[i].row, std::get<2>(key))) continue;
        ++pairs;
        file = x.c->file;
        const Tensor &a = x.c->outputs.at("cmp_kv"), &b = y.c->outputs.at("cmp_kv");
        const std::int64_t D = x.p.D;
        for (std::int64_t d = 0; d < D; ++d)
          if (a.bits(v[k].row * D + d) != b.bits(v[i].row * D + d)) {
            if (bad++ == 0)
              first = "request " + std::to_string(std::get<1>(key)) + " entry " + std::to_string(std::get<2>(key)) +
                      (std::get<0>(key).empty() ? "" : " (layer " + std::get<0>(key) + ")") + ": case '" + x.c->name + "' row " +
                      std::to_string(v[k].row) + " and case '" + y.c->name + "' row " + std::to_string(v[i].row) +
                      " differ first at dim " + std::to_string(d) + " (" + cmp::num_json(a.value(v[k].row * D + d)).dump() + " vs " +
                      cmp::num_json(b.value(v[i].row * D + d)).dump() + ")";
            break;
          }
        break;
      }
    }
  }
  auto res = repeated_rows_result(kName, "cmp_kv", "requests", file, pairs, bad,
                                  "repeated (request, entry) row(s) with identical inputs differ between calls (prefill == chunked == decode, batch invariance); first: ",
                                  first, "repeated (request, entry) row(s) with identical inputs identical across calls (prefill == chunked == decode, batch invariance)");
  if (info.empty()) res.front().message = "0 repeated row(s) compared: no call carries the provenance attr request_ids (one id per request)";
  if (repeated > pairs)
    res.front().message += "; " + std::to_string(repeated - pairs) + " repeated row(s) not compared (their inputs differ: other weights, state rows or tokens)";
  return res;
}

}  // namespace

Stage stage() {
  using DT = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepSeek-V4 / V4.1 KV compressor (Ascend compressor op, TND): c4 overlap / c128 (V4.1: c1 / c2) gating pools, RMSNorm, RoPE at jr, state cache";
  s.spec = "v4 §2, §5, §6";
  s.formula = "entry j of request b: C[c] = sum_rows softmax_rows(S[., c]) KV[., c] over the window rows (KV = x wkv^T, S = x wgate^T + ape); cmp_kv[j] = bf16(RoPE_jr(C / sqrt(mean C^2 + eps) * gamma)); state rows KV | S written through state_block_table";
  s.default_tolerance = "derived-bound";
  s.schema.attrs = {
      int_attr("cmp_ratio", 4, "r: tokens per compressed entry (C4: 4 with overlap, C128: 128)"),
      int_attr("coff", 2, "2 = overlap (8-row windows: previous group a-half + current group b-half), 1 = none"),
      int_attr("rope_head_dim", 64, "RoPE dims (the last ones of D), interleaved pairs"),
      num_attr("norm_eps", 1e-6, "RMSNorm epsilon"),
      bool_attr("rotate", false, "indexer compressor (D = 128): Hadamard-128 after the cast (ascend-a3, ref; vllm-cuda applies none)"),
      int_attr("cache_mode", 1, "1 = continuous state rows (block table[p / bs]), 2 = cycle ring of coff*r tokens"),
      opt_str_attr("model", {"v4", "v41"},
                   "v4 (default) or v41: DeepSeek-V4.1 (ratios 1 / 2, no overlap, no APE; the entry quantized to NVFP4 "
                   "by ref and vllm-cuda, bf16 by ascend-a3's compressor_v2)"),
      opt_bool_attr("pooled_bf16", "round the pooled value to bf16 before the norm (default: 1 for ref and for V4.1's "
                                   "ratio 1 (a bf16 Linear), 0 otherwise: vLLM normalizes the fp32 pooled value)"),
      opt_int_attr("ring_rows", "cache_mode 2: state rows per request in the ring, row p mod ring_rows (default coff * "
                                "cmp_ratio; vLLM's ring capacity, 32 for the Ascend compressor_v2)")};
  s.default_profile = "ascend-a3";
  s.profile_doc = "ascend-a3: fp32 to the end, x/sqrt(mean+eps), one RNE cast (rotate: bf16(bf16(y@H)*128^-0.5)); ref: DeepSeek "
                  "inference (pooled kv -> bf16 before the norm, bf16 after norm and RoPE, FP8 ue8m0 QAT of the nope dims; "
                  "rotate: Hadamard -> bf16 -> FP4 QAT); vllm-cuda: fp32 pipeline, D 512: FP8 ue8m0 QAT of the nope dims (blocks of 64), "
                  "D 128: one FP8 ue8m0 block over all 128 dims after RoPE, no Hadamard (rotate ignored)";
  s.schema.inputs = {
      {"x", {DT::bf16}, {"T,H"}, true, "hidden states of the step's tokens (TND, requests packed)"},
      {"wkv", {DT::bf16}, {"C2,H"}, true, "kv projection [coff*D, H] (a-half first with overlap)"},
      {"wgate", {DT::bf16}, {"C2,H"}, true, "gate projection [coff*D, H] (absent with cmp_ratio 1: no gate)"},
      {"kv_proj", {DT::f32}, {"T,C2"}, true, "instead of x/wkv/wgate: the per-token kv projections x.wkv^T"},
      {"score_proj", {DT::f32}, {"T,C2"}, true, "instead of x/wkv/wgate: x.wgate^T (ape not added; absent with cmp_ratio 1)"},
      {"ape", {DT::f32}, {"cmp_ratio,C2"}, true, "position-in-group embedding added to the scores (absent: none, DeepSeek-V4.1)"},
      {"norm_weight", {DT::bf16}, {"D"}, false, "RMSNorm weight"},
      {"rope_sin", {DT::f32}, {"R,rope_head_dim"}, false, "sin per output row (position jr), interleave-duplicated; sin first as the op takes it"},
      {"rope_cos", {DT::f32}, {"R,rope_head_dim"}, false, "cos per output row"},
      {"state_cache_in", {DT::f32}, {"nblk,bs,?"}, false, "state rows before the step: KV_p (coff*D) | S_p (coff*D, ape added)"},
      {"state_block_table", {DT::i32}, {"B,maxblk"}, false, "state block ids per request; 0 = do not write"},
      {"cu_seqlens", {DT::i32, DT::i64}, {"?"}, false, "[B+1] token offsets of the requests in x"},
      {"start_pos", {DT::i32, DT::i64}, {"B"}, false, "position of each request's first token in this step"}};
  s.schema.outputs = {{{"cmp_kv", {DT::bf16}, {"R,D"}, false, "compressed entries, request by request in increasing j; rows past the emitted ones are padding (not compared)"}, CompareKind::bounded},
                      {{"state_cache", {DT::f32}, {"nblk,bs,?"}, false, "state rows after the step (written rows bounded, the rest exact)"}, CompareKind::bounded}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.cross_check = cross_check;
  s.cross_attrs = {"request_ids"};
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::v4::compressor
