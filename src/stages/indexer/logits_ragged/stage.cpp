// indexer.logits_ragged: schema, parse, row identity across calls, table entry.
#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <variant>

#include "stages/indexer/attrs.hpp"
#include "engines/logits/logits_engine.hpp"
#include "profiles/profiles.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::logits_ragged {
namespace {

const char* kName = "indexer.logits_ragged";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.clean_logits = a.b("clean_logits");
  r.max_seqlen_k = a.i("max_seqlen_k");
  r.bf16 = a.s("logits_dtype") == "bf16";
  r.torch = a.profile() == &profiles::vllm_torch();
  check_logits_heads(c, "inputs/q", c.input("q").dim(1), c.input("q").dim(2), p);
  const auto N = c.input("kv").dim(0);
  const auto msk = r.max_seqlen_k;
  if (msk < 0) p.push_back({c.file, c.name, "attr max_seqlen_k", ">= 0", std::to_string(msk)});
  if (msk > 0 && r.clean_logits)
    p.push_back({c.file, c.name, "attr clean_logits", "0 when max_seqlen_k > 0 (DeepGEMM requires it)", "1"});
  const Tensor& ks = c.input("ks");
  const Tensor& ke = c.input("ke");
  for (std::int64_t i = 0; i < ks.numel(); ++i) {
    const auto lo = ks.data<std::int32_t>()[i], hi = ke.data<std::int32_t>()[i];
    if (lo < 0 || hi < lo || hi > N) {
      p.push_back({c.file, c.name, "inputs/ks, inputs/ke", "0 <= ks <= ke <= N = " + std::to_string(N),
                   "row " + std::to_string(i) + ": ks=" + std::to_string(lo) + " ke=" + std::to_string(hi)});
      break;
    }
    // Compressed logits hold max_seqlen_k columns: a wider row would be cut (DeepGEMM writes past the row).
    if (msk > 0 && hi - lo > msk) {
      p.push_back({c.file, c.name, "attr max_seqlen_k", ">= every row's ke - ks (row " + std::to_string(i) + ": " + std::to_string(hi - lo) + ")",
                   std::to_string(msk)});
      break;
    }
  }
  // As indexer.logits_paged: logits no stored tensor holds must fit the memory budget (inputs-only cases).
  if (!c.outputs.count("logits") && !c.expected.count("logits"))
    check_reference_memory(c, static_cast<double>(c.input("q").dim(0)) * static_cast<double>(msk > 0 ? msk : N) * 17.0,
                           msk > 0 ? "attr max_seqlen_k" : "inputs/kv", p);
  for (const auto* g : {&c.outputs, &c.expected}) {
    auto it = g->find("logits");
    if (it == g->end()) continue;
    const auto want = msk > 0 ? msk : N;
    if (it->second.dim(1) != want)
      p.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs" : "expected") + "/logits",
                   "dim 1 = " + std::string(msk > 0 ? "max_seqlen_k" : "N") + " = " + std::to_string(want),
                   std::to_string(it->second.dim(1))});
  }
  return r;
}

// Known bugs as values: logit f = (row i, column col -> key j).
std::optional<engines::logits::LogitOperands> operands(const Case& c, const Params& p, std::int64_t f) {
  const Tensor &q = c.input("q"), &kv = c.input("kv");
  const Rows rows{c.input("ks").data<std::int32_t>(), c.input("ke").data<std::int32_t>(), kv.dim(0), p.max_seqlen_k};
  const std::int64_t i = f / rows.cols(), col = f % rows.cols(), H = q.dim(1), D = q.dim(2);
  const std::int64_t j = p.max_seqlen_k > 0 ? rows.lo(i) + col : col;
  if (j < rows.lo(i) || j >= rows.hi(i)) return std::nullopt;
  return engines::logits::LogitOperands{q.data<std::uint8_t>() + i * H * D, c.input("weights").data<float>() + i * H,
                               kv.data<std::uint8_t>() + j * D, c.input("kv_scale").data<float>()[j], H, D};
}

// Chunked prefill (seed 000's _should_chunk_mqa_logits path: query-row chunks of one call, the whole kv each time),
// context-parallel ranks (prev/next chunks over the gathered kv) and reruns compute rows of one unsplit call: every
// row keeps its global [ks, ke). Cases that carry provenance attr `request_ids` (one id per query row) opt in: rows
// keyed by (attr layer, attr step, request id, ks, ke) whose inputs are byte-identical (the q row, the weights row,
// kv and kv_scale over [ks, ke)) must give identical logits bits over [ks, ke). Logits streamed from the file in row
// tiles are not held in memory and are not compared here.
std::vector<cmp::CheckResult> row_identity(const std::vector<const Case*>& cases) {
  auto str = [](const Case* c, const char* k) { return c->has_attr(k) ? attr_to_string(c->attrs.at(k)) : std::string(); };
  struct Ref {
    const Case* c;
    std::int64_t row;
  };
  std::map<std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t>, std::vector<Ref>> rows;
  std::int64_t keyed = 0;  // cases with provenance (and logits held in memory)
  for (const Case* c : cases) {
    auto it = c->outputs.find("logits");
    auto r = c->attrs.find("request_ids");
    if (it == c->outputs.end() || !it->second.defined() || r == c->attrs.end() ||
        !std::holds_alternative<std::vector<std::int64_t>>(r->second))
      continue;
    const auto& rid = std::get<std::vector<std::int64_t>>(r->second);
    const Tensor& ks = c->input("ks");
    const Tensor& ke = c->input("ke");
    if (rid.size() != static_cast<std::size_t>(ks.numel())) continue;
    ++keyed;
    for (std::int64_t i = 0; i < ks.numel(); ++i)
      rows[{str(c, "layer"), str(c, "step"), rid[static_cast<std::size_t>(i)], ks.int_at(i), ke.int_at(i)}].push_back({c, i});
  }
  // Byte-identical slices of two tensors: `n` elements from row ra of a and rb of b (rows of `len` elements).
  auto same = [](const Tensor& a, std::int64_t oa, const Tensor& b, std::int64_t ob, std::int64_t n) {
    const std::int64_t es = static_cast<std::int64_t>(dtype_size(a.dtype()));
    return a.dtype() == b.dtype() && std::memcmp(a.raw() + oa * es, b.raw() + ob * es, static_cast<std::size_t>(n * es)) == 0;
  };
  auto same_inputs = [&](const Ref& x, const Ref& y, std::int64_t lo, std::int64_t hi) {
    const Case &a = *x.c, &b = *y.c;
    const std::int64_t HD = a.input("q").numel() / std::max<std::int64_t>(a.input("q").dim(0), 1);
    const std::int64_t H = a.input("weights").dim(1), D = a.input("kv").dim(1);
    return b.input("q").numel() / std::max<std::int64_t>(b.input("q").dim(0), 1) == HD && b.input("weights").dim(1) == H &&
           b.input("kv").dim(1) == D && hi <= a.input("kv").dim(0) && hi <= b.input("kv").dim(0) &&
           same(a.input("q"), x.row * HD, b.input("q"), y.row * HD, HD) &&
           same(a.input("weights"), x.row * H, b.input("weights"), y.row * H, H) &&
           same(a.input("kv"), lo * D, b.input("kv"), lo * D, (hi - lo) * D) &&
           same(a.input("kv_scale"), lo, b.input("kv_scale"), lo, hi - lo);
  };
  std::string file = cases.front()->file;
  std::int64_t pairs = 0, bad = 0;
  std::string first;
  auto range = [](const Case* c) { return std::to_string(c->input("ks").numel()) + " rows"; };
  for (const auto& [key, v] : rows) {
    if (v.size() < 2) continue;
    const auto [layer, step, rq, lo, hi] = key;
    auto col = [lo = lo](const Case* c, std::int64_t t) {  // column of key lo + t (compressed logits: t)
      const bool compressed = c->has_attr("max_seqlen_k") && attr_as_int(*c, "max_seqlen_k", c->attrs.at("max_seqlen_k")) > 0;
      return compressed ? t : lo + t;
    };
    for (std::size_t k = 1; k < v.size(); ++k) {
      const Tensor& a = v.front().c->outputs.at("logits");
      const Tensor& b = v[k].c->outputs.at("logits");
      if (v[k].c == v.front().c || a.dtype() != b.dtype() || !same_inputs(v.front(), v[k], lo, hi)) continue;
      ++pairs;
      for (std::int64_t t = 0; t < hi - lo; ++t) {
        const std::int64_t ca = col(v.front().c, t), cb = col(v[k].c, t);
        if (ca >= a.dim(1) || cb >= b.dim(1)) break;
        const std::int64_t fa = v.front().row * a.dim(1) + ca, fb = v[k].row * b.dim(1) + cb;
        if (a.bits(fa) == b.bits(fb)) continue;
        if (bad++ == 0)
          first = "request " + std::to_string(rq) + " row with keys [" + std::to_string(lo) + ", " + std::to_string(hi) + ")" +
                  (layer.empty() ? "" : " of layer " + layer) + ": case '" + v.front().c->name + "' (" + range(v.front().c) + ") row " +
                  std::to_string(v.front().row) + " and case '" + v[k].c->name + "' (" + range(v[k].c) + ") row " +
                  std::to_string(v[k].row) + " differ first at key " + std::to_string(lo + t) + " (" + cmp::num_json(a.value(fa)).dump() +
                  " vs " + cmp::num_json(b.value(fb)).dump() + ")";
        break;
      }
      file = v.front().c->file;
    }
  }
  auto res = repeated_rows_result(kName, "logits", "rows", file, pairs, bad,
                              "row(s) with identical inputs in several calls (chunked prefill, context-parallel ranks, reruns) differ; first: ", first,
                              "row(s) with identical inputs in several calls (chunked prefill, context-parallel ranks, reruns) give identical bits");
  if (!keyed) res.front().message = "0 repeated row(s) compared: no call carries the provenance attr request_ids (one id per query row)";
  return res;
}

}  // namespace

Stage stage() {
  using D = DType;
  const std::vector<DType> kFP8{D::fp8_e4m3fn}, kF32{D::f32};
  Stage s;
  s.name = kName;
  s.summary = "DeepGEMM fp8_mqa_logits: ragged prefill MQA logits over [ks, ke) per query row";
  s.spec = "v32 §3.2, §3.5";
  s.formula = "logits[i,j] = fl32( kv_scale[j] * sum_h W[i,h] * relu(q[i,h,:] . kv[j,:]) ) for ks[i] <= j < ke[i] (fp8 codes), -inf elsewhere";
  s.default_tolerance = "sm90-fp8";
  s.schema.attrs = {bool_attr("clean_logits", true, "columns outside [ks, ke) are -inf (true) or undefined (false)"),
                    int_attr("max_seqlen_k", 0, "> 0: compressed logits [S, max_seqlen_k], column t = key ks+t"),
                    logits_dtype_attr()};  // + attr kernel (added by the table: deepgemm-sm90 emulates this stage)
  s.schema.inputs = {{"q", kFP8, {"S,H,Dh"}, false, "fp8 queries (q scale folded into weights)"},
                     {"kv", kFP8, {"N,Dh"}, false, "fp8 keys"},
                     {"kv_scale", kF32, {"N"}, false, "per-key fp32 scale"},
                     {"weights", kF32, {"S,H"}, false, "head gates W"},
                     {"ks", {D::i32}, {"S"}, false, "cu_seq_len_k_start: first valid key per row"},
                     {"ke", {D::i32}, {"S"}, false, "cu_seq_len_k_end: one past the last valid key per row"}};
  s.schema.outputs = {{{"logits", {D::f32, D::bf16}, {"S,?"}, false, "logits [S, N] (or [S, max_seqlen_k])"}, CompareKind::bounded, false, true}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  s.hypotheses = engines::logits::logit_hypotheses<Params>(&operands);
  s.cross_check = row_identity;
  s.cross_attrs = {"request_ids"};
  s.tiling = RowTiling{"logits", [](const Case&, const dsa::Params&) { return std::int64_t{1}; }};
  return s;
}

}  // namespace dsa::indexer::logits_ragged
