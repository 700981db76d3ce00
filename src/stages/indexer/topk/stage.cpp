// indexer.topk: schema, parse, table entry.
#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <variant>

#include "layouts/index_base.hpp"
#include "stages/indexer/attrs.hpp"
#include "engines/topk/topk_canonical.hpp"
#include "stages/indexer/table.hpp"
#include "stages/indexer/topk/stage.hpp"

namespace dsa::indexer::topk {

namespace {

// Every row's candidate range [row_start, row_start + length) lies inside the logits.
bool rows_in_range(const Case& c, std::vector<Problem>& p) {
  const Tensor& lg = c.input("logits");
  const Tensor& len = c.input("lengths");
  const Tensor* rs = c.input_opt("row_starts");
  for (std::int64_t r = 0; r < len.numel(); ++r) {
    const auto L = len.data<std::int32_t>()[r];
    const auto s0 = rs ? rs->data<std::int32_t>()[r] : 0;
    if (L < 0 || s0 < 0 || s0 + static_cast<std::int64_t>(L) > lg.dim(1)) {
      p.push_back({c.file, c.name, "inputs/lengths, inputs/row_starts", "0 <= row_start, row_start + length <= C = " + std::to_string(lg.dim(1)),
                   "row " + std::to_string(r) + ": start " + std::to_string(s0) + " length " + std::to_string(L)});
      return false;
    }
  }
  return true;
}

// Emitted indices are int32 (the engines' dtype): every mapped index must be in [0, 2^31).
bool indices_fit_int32(const Case& c, const Params& prm, std::vector<Problem>& p) {
  const Tensor& len = c.input("lengths");
  if (const Tensor* off = c.input_opt("offsets"); off && prm.index_base == layouts::IndexBase::ragged_offset)
    for (std::int64_t r = 0; r < len.numel(); ++r) {
      const std::int64_t o = off->int_at(r);
      if (o < 0 || o + len.int_at(r) > std::numeric_limits<std::int32_t>::max()) {
        p.push_back({c.file, c.name, "inputs/offsets", "offsets[r] >= 0 and offsets[r] + lengths[r] < 2^31",
                     "row " + std::to_string(r) + ": offset " + std::to_string(o) + " length " + std::to_string(len.int_at(r))});
        return false;
      }
    }
  if (const Tensor* pt = c.input_opt("page_table"); pt && prm.index_base == layouts::IndexBase::page_slot) {
    const std::int64_t ps = prm.page_size;
    for (std::int64_t i = 0; i < pt->numel(); ++i)
      if (ps <= 0 || (pt->int_at(i) + 1) * ps > std::numeric_limits<std::int32_t>::max()) {
        p.push_back({c.file, c.name, "inputs/page_table", "page ids with (page + 1) * page_size < 2^31 (page_size > 0)",
                     "page id " + std::to_string(pt->int_at(i)) + ", page_size " + std::to_string(ps)});
        return false;
      }
  }
  return true;
}

// page_slot: every page a valid candidate maps to exists, and a request's pages are distinct (else an emitted slot
// would stand for two candidates).
void page_table_complete(const Case& c, const Params& prm, std::vector<Problem>& p) {
  const Tensor& len = c.input("lengths");
  const Tensor* pt = c.input_opt("page_table");
  const auto ps = prm.page_size, rpr = prm.rows_per_request;
  if (ps <= 0 || rpr <= 0) {
    p.push_back({c.file, c.name, ps <= 0 ? "attr page_size" : "attr rows_per_request", "> 0", std::to_string(ps <= 0 ? ps : rpr)});
    return;
  }
  if (!pt) return;
  const auto nq = pt->dim(0), nb = pt->dim(1);
  if ((len.numel() + rpr - 1) / rpr > nq) {
    p.push_back({c.file, c.name, "inputs/page_table", "ceil(R / rows_per_request) = " + std::to_string((len.numel() + rpr - 1) / rpr) + " rows",
                 std::to_string(nq)});
    return;
  }
  for (std::int64_t q = 0; q < nq; ++q) {
    std::int64_t L = 0;
    for (std::int64_t r = q * rpr; r < std::min((q + 1) * rpr, len.numel()); ++r) L = std::max<std::int64_t>(L, len.data<std::int32_t>()[r]);
    const auto blocks = (L + ps - 1) / ps;
    if (blocks > nb) {
      p.push_back({c.file, c.name, "inputs/page_table",
                   "at least ceil(length/page_size) = " + std::to_string(blocks) + " columns for request " + std::to_string(q), std::to_string(nb)});
      return;
    }
    std::map<std::int64_t, std::int64_t> seen;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::int64_t pg = pt->int_at(q * nb + b);
      if (pg < 0) {
        p.push_back({c.file, c.name, "inputs/page_table", "page ids >= 0 in the blocks rows use",
                     "request " + std::to_string(q) + " block " + std::to_string(b) + ": " + std::to_string(pg)});
        return;
      }
      if (auto [it, fresh] = seen.emplace(pg, b); !fresh) {
        p.push_back({c.file, c.name, "inputs/page_table", "distinct pages per request",
                     "request " + std::to_string(q) + ": page " + std::to_string(pg) + " in blocks " + std::to_string(it->second) + " and " +
                         std::to_string(b)});
        return;
      }
    }
  }
}

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params out;
  out.k = a.i("k");
  out.index_base = layouts::parse_index_base(a.s("index_base"));
  out.sorted = a.b("sorted");
  out.fast_path = a.b("fast_path");
  out.short_rows_torch = a.has("short_rows") && a.s("short_rows") == "torch";
  if (out.short_rows_torch && out.fast_path)
    p.push_back({c.file, c.name, "attr fast_path", "0 with short_rows=torch (torch.topk has no fast path: set fast_path=0)", "1"});
  out.num_init = a.i("num_init_tokens");
  out.num_local = a.i("num_local_tokens");
  out.page_size = a.i("page_size");
  out.rows_per_request = a.i("rows_per_request");
  const bool page_slot = out.index_base == layouts::IndexBase::page_slot;
  if (out.index_base == layouts::IndexBase::ragged_offset && !c.input_opt("offsets"))
    p.push_back({c.file, c.name, "inputs/offsets", "a tensor when index_base=ragged_offset", "none"});
  if (page_slot && !c.input_opt("page_table"))
    p.push_back({c.file, c.name, "inputs/page_table", "a tensor when index_base=page_slot", "none"});
  if (out.k <= 0) p.push_back({c.file, c.name, "attr k", "> 0", std::to_string(out.k)});
  if (!rows_in_range(c, p) || !indices_fit_int32(c, out, p)) return out;
  for (const char* n : {"num_init_tokens", "num_local_tokens"})
    if (a.i(n) < 0) p.push_back({c.file, c.name, std::string("attr ") + n, ">= 0", std::to_string(a.i(n))});
  // The index tensor must hold k columns (extra columns are -1 padding).
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("indices"); it != g->end() && it->second.rank() == 2 && it->second.dim(1) < out.k)
      p.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs" : "expected") + "/indices",
                   "dim 1 >= k = " + std::to_string(out.k), std::to_string(it->second.dim(1))});
  if (page_slot) page_table_complete(c, out, p);
  return out;
}

// Context-parallel ranks (seed 000: prev/next halves of each request's rows), chunked prefill and reruns select from
// rows of one unsplit call: cases that carry provenance attr `request_ids` (one id per row) opt in, and rows keyed by
// (attr layer, attr step, request id, length) whose candidate scores are byte-identical (same dtype, k, forced tokens,
// fast path) must select the same candidate positions in every call (indices read back through each case's own index
// base, so ranks may emit rank-local or global indices). Sets that differ only among candidates tied exactly with
// the k-th score are the same selection up to the tie rule and pass.
std::vector<cmp::CheckResult> row_identity(const std::vector<const Case*>& cases) {
  auto str = [](const Case* c, const char* k) { return c->has_attr(k) ? attr_to_string(c->attrs.at(k)) : std::string(); };
  struct Row {
    const Case* c;
    std::shared_ptr<const layouts::IndexMap> map;
    const Params* p;
    std::int64_t r;
  };
  std::vector<BoundCase> bound;
  bound.reserve(cases.size());
  std::map<std::tuple<std::string, std::string, std::int64_t, std::int64_t>, std::vector<Row>> rows;
  std::vector<std::shared_ptr<const layouts::IndexMap>> maps;
  std::int64_t keyed = 0;  // cases with provenance
  for (const Case* c : cases) {
    auto it = c->outputs.find("indices");
    auto rq = c->attrs.find("request_ids");
    if (it == c->outputs.end() || !it->second.defined() || it->second.rank() != 2 || rq == c->attrs.end() ||
        !std::holds_alternative<std::vector<std::int64_t>>(rq->second))
      continue;
    const auto& rid = std::get<std::vector<std::int64_t>>(rq->second);
    const Tensor& len = c->input("lengths");
    if (rid.size() != static_cast<std::size_t>(len.numel())) continue;
    BoundCase b;
    if (!validate_case(*c, false, &b).empty() || !b.params) continue;
    bound.push_back(b);
    const auto* p = static_cast<const Params*>(bound.back().params.get());
    ++keyed;
    auto map = std::make_shared<const layouts::IndexMap>(index_map(*c, *p));
    for (std::int64_t r = 0; r < len.numel(); ++r)
      rows[{str(c, "layer"), str(c, "step"), rid[static_cast<std::size_t>(r)], len.int_at(r)}].push_back({c, map, p, r});
  }
  // Candidate scores of a row as raw bytes (the logits slice) and the forced-token rules that shape them.
  auto slice = [](const Row& x) {
    const Tensor& lg = x.c->input("logits");
    const std::int64_t es = static_cast<std::int64_t>(dtype_size(lg.dtype()));
    const std::int64_t s0 = x.map->start[static_cast<std::size_t>(x.r)], n = x.map->len[static_cast<std::size_t>(x.r)];
    return std::string(reinterpret_cast<const char*>(lg.raw()) + (x.r * lg.dim(1) + s0) * es, static_cast<std::size_t>(n * es));
  };
  auto same_rules = [](const Params& a, const Params& b) {
    return a.k == b.k && a.fast_path == b.fast_path && a.num_init == b.num_init && a.num_local == b.num_local &&
           a.short_rows_torch == b.short_rows_torch;
  };
  auto picks = [](const Row& x) {
    const Tensor& out = x.c->outputs.at("indices");
    std::set<std::int64_t> s;
    for (std::int64_t j = 0; j < out.dim(1); ++j) {
      const std::int64_t idx = out.int_at(x.r * out.dim(1) + j);
      if (idx >= 0) s.insert(x.map->from_index(x.r, idx));  // -1: not a candidate of this row
    }
    return s;
  };
  std::string file = cases.front()->file, first;
  std::int64_t pairs = 0, bad = 0;
  for (const auto& [key, v] : rows) {
    if (v.size() < 2) continue;
    const std::string s0 = slice(v.front());
    std::set<std::int64_t> p0;
    bool have_p0 = false;
    for (std::size_t k = 1; k < v.size(); ++k) {
      const Row &a = v.front(), &b = v[k];
      if (b.c == a.c || a.c->input("logits").dtype() != b.c->input("logits").dtype() || !same_rules(*a.p, *b.p) || slice(b) != s0) continue;
      ++pairs;
      file = a.c->file;
      if (!have_p0) p0 = picks(a), have_p0 = true;
      const std::set<std::int64_t> p1 = picks(b);
      if (p0 == p1) continue;
      // Differences only among candidates tied with the k-th score pass.
      const Tensor& lg = a.c->input("logits");
      const std::int64_t n = std::get<3>(key), st = a.map->start[static_cast<std::size_t>(a.r)];
      std::vector<double> sc(static_cast<std::size_t>(n));
      row_scores([&](std::int64_t col) { return lg.value(a.r * lg.dim(1) + col); }, st, n, n, *a.p, sc.data());
      const std::vector<std::int64_t> sel = engines::topk::topk_canonical(sc.data(), n, a.p->k);
      const double kth = sel.empty() ? 0.0 : sc[static_cast<std::size_t>(sel.back())];
      std::vector<std::int64_t> diff;
      std::set_symmetric_difference(p0.begin(), p0.end(), p1.begin(), p1.end(), std::back_inserter(diff));
      const bool ties_only = n > a.p->k && std::all_of(diff.begin(), diff.end(), [&](std::int64_t q) {
        return q >= 0 && q < n && sc[static_cast<std::size_t>(q)] == kth;
      });
      if (ties_only) continue;
      if (bad++ == 0) {
        const std::int64_t q = diff.front();
        const bool in0 = p0.count(q) != 0;
        first = "request " + std::to_string(std::get<2>(key)) + " row of " + std::to_string(n) + " candidates" +
                (std::get<0>(key).empty() ? "" : " of layer " + std::get<0>(key)) + ": case '" + a.c->name + "' row " + std::to_string(a.r) +
                " and case '" + b.c->name + "' row " + std::to_string(b.r) + " select different candidates; first: position " +
                std::to_string(q) + (q >= 0 && q < n ? " (score " + cmp::num_json(sc[static_cast<std::size_t>(q)]).dump() + ", k-th " +
                                                           cmp::num_json(kth).dump() + ")" : " (not a candidate)") +
                " selected only by '" + (in0 ? a.c->name : b.c->name) + "'";
      }
    }
  }
  auto res = repeated_rows_result("indexer.topk", "indices", "rows", file, pairs, bad,
                              "row(s) with identical candidate scores in several calls (context-parallel ranks, chunked prefill, reruns) select different candidates; first: ",
                              first, "row(s) with identical candidate scores in several calls (context-parallel ranks, chunked prefill, reruns) select the same candidates");
  if (!keyed) res.front().message = "0 repeated row(s) compared: no call carries the provenance attr request_ids (one id per row)";
  return res;
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = "indexer.topk";
  s.summary = "top-k over each row's valid range with -1 padding and engine index bases";
  s.spec = "v32 §5";
  s.formula = "indices[r, :] = the k positions p < lengths[r] with the largest logits[r, row_starts[r] + p] (any order, ties at the k-th score free), -1 padded; index base per attr";
  s.schema.attrs = {int_attr("k", 2048, "top-k width"),
                    str_attr("index_base", "relative", layouts::index_base_names(), layouts::index_base_doc()),
                    bool_attr("sorted", false, "output in descending score order (demo torch.topk); fast-path rows (fast_path=1, len <= k) keep their positional order"),
                    bool_attr("fast_path", true, "rows with len <= k emit [0..len-1] then -1 regardless of scores"),
                    opt_str_attr("short_rows", {"pad", "torch"},
                                 "rows shorter than k: pad (default) = -1 after the len picks; torch = torch.topk over a "
                                 "-inf-masked row, whose k - len trailing picks name -inf columns (requires fast_path=0)"),
                    int_attr("num_init_tokens", 0, "sglang forced init tokens (+inf), §5.4"),
                    int_attr("num_local_tokens", 0, "sglang forced local tokens (+inf), §5.4"),
                    int_attr("page_size", 64, "tokens per page (page_slot)"),
                    int_attr("rows_per_request", 1, "rows sharing one page_table row (next_n), page_slot only")};
  s.schema.inputs = {
      {"logits", {D::f32, D::bf16, D::fp16}, {"R,C"}, false,
       "scores (fp32, bf16 or fp16); row r candidates are logits[r, row_starts[r] : row_starts[r]+lengths[r]]"},
      {"lengths", {D::i32}, {"R"}, false, "valid candidates per row"},
      {"row_starts", {D::i32}, {"R"}, true, "first candidate column per row (default 0)"},
      {"offsets", {D::i32}, {"R"}, true, "ragged_offset: added to relative indices"},
      {"page_table", {D::i32}, {"Q,?"}, true, "page_slot: physical page ids per request"}};
  s.schema.outputs = {{{"indices", {D::i32, D::i64}, {"R,?"}, false, "selected indices, -1 padded"}, CompareKind::topk_set}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.cross_check = row_identity;
  s.cross_attrs = {"request_ids"};
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::indexer::topk
