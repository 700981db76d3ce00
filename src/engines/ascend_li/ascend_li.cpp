// Shared metadata checks and the top-k reference of the Ascend lightning-indexer ops (see ascend_li.hpp).
#include "engines/ascend_li/ascend_li.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "numerics/formats.hpp"
#include "engines/topk/topk_canonical.hpp"

namespace dsa::engines::ascend_li {

using i64 = std::int64_t;

core::Elem elem_of(const Tensor& t) {
  switch (t.dtype()) {
    case DType::bf16: return core::Elem::bf16;
    case DType::fp16: return core::Elem::fp16;
    case DType::fp8_e4m3fn: return core::Elem::e4m3;
    case DType::int8: return core::Elem::int8;
    default: return core::Elem::f32;
  }
}

void widen(const Tensor& t, i64 offset, i64 n, double* dst) {
  const core::Elem e = elem_of(t);
  const void* base = t.raw();
  for (i64 i = 0; i < n; ++i) dst[i] = core::widen(base, e, offset + i);
}

// Compiled for AVX2 and baseline: the same bits (no reassociation, no contraction).
__attribute__((target_clones("avx2", "default"))) void heads_dot64(const double* q, const double* k, i64 H, i64 D, double* dot,
                                                                    double* abs) {
  for (i64 h = 0; h < H; ++h) {
    const double* qh = q + h * D;
    core::dot64([qh](i64 d) { return qh[d]; }, [k](i64 d) { return k[d]; }, D, dot[h], abs[h]);
  }
}

bool parse_call(const Case& c, const Call& call, Geometry& g, std::vector<Problem>& pr) {
  auto bad = [&](const std::string& t, const std::string& want, const std::string& found) {
    pr.push_back({c.file, c.name, t, want, found});
    return false;
  };
  const Tensor& aq = c.input(call.aq_name);
  const Tensor& ak = c.input(call.ak_name);
  const Tensor& bt = c.input("block_table");
  const std::string in_aq = "inputs/" + call.aq_name, in_ak = "inputs/" + call.ak_name;
  if (aq.numel() != g.B || ak.numel() != g.B)
    return bad(in_aq + ", " + in_ak, "B = " + std::to_string(g.B) + " entries (block_table rows)",
               std::to_string(aq.numel()) + " and " + std::to_string(ak.numel()));
  i64 prev = 0;
  for (i64 b = 0; b < g.B; ++b) {
    const i64 end = aq.int_at(b), kv = ak.int_at(b);
    if (end < prev || end > call.T)
      return bad(in_aq, "non-decreasing prefix sums (no leading 0) within the call's " + std::to_string(call.T) + " query rows",
                 "request " + std::to_string(b) + ": " + std::to_string(end) + " after " + std::to_string(prev));
    if (kv < 0 || kv > (i64{1} << 40))
      return bad(in_ak, "uncompressed token counts in 0..2^40", "request " + std::to_string(b) + ": " + std::to_string(kv));
    const i64 nv = kv / g.cmp_ratio;  // the request's last row (position kv - 1) sees kv / r entries
    if (end > prev) {
      g.max_nvis = std::max(g.max_nvis, nv);
      const i64 blocks = (nv + g.bs - 1) / g.bs;
      if (blocks > g.maxblk)
        return bad("inputs/block_table", "at least ceil(nvis / block size) = " + std::to_string(blocks) + " blocks for request " +
                                             std::to_string(b) + " (" + std::to_string(nv) + " visible keys)",
                   std::to_string(g.maxblk) + " columns");
      for (i64 j = 0; j < blocks; ++j)
        if (const i64 id = bt.int_at(b * g.maxblk + j); id < 0 || id >= g.nblk)
          return bad("inputs/block_table", "block ids in [0, " + std::to_string(g.nblk) + ") for the blocks a request reads",
                     "request " + std::to_string(b) + " block " + std::to_string(j) + ": " + std::to_string(id));
    }
    prev = end;
  }
  if (prev != call.T)
    return bad(in_aq, "last prefix sum = the call's query rows = " + std::to_string(call.T), std::to_string(prev));
  return true;
}

void fill_rows(const Case& c, const Call& call, const Geometry& g, std::vector<Row>& rows) {
  const Tensor& aq = c.input(call.aq_name);
  const Tensor& ak = c.input(call.ak_name);
  i64 start = 0;
  for (i64 b = 0; b < g.B; ++b) {
    const i64 end = aq.int_at(b), qlen = end - start, kv = ak.int_at(b);
    for (i64 i = 0; i < qlen && start + i < call.T; ++i) {
      Row& r = rows[static_cast<std::size_t>(call.row0 + start + i)];
      r.b = b;
      r.qlen = qlen;
      r.pos = kv - qlen + i;
      r.nvis = r.pos + 1 > 0 ? (r.pos + 1) / g.cmp_ratio : 0;
    }
    start = end;
  }
}

void check_width(const Case& c, const std::string& output, i64 k, std::vector<Problem>& pr) {
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(output); it != g->end() && it->second.rank() >= 1 && it->second.dim(-1) < k)
      pr.push_back({c.file, c.name, std::string(g == &c.outputs ? "outputs/" : "expected/") + output,
                    "last dim >= sparse_count = " + std::to_string(k), std::to_string(it->second.dim(-1))});
}

std::pair<Tensor, Tensor> score_buffers(const std::vector<Row>& rows) {
  const i64 T = static_cast<i64>(rows.size());
  i64 C = 1;  // score buffer width
  for (const Row& r : rows) C = std::max(C, r.nvis);
  Tensor scores(DType::f64, {T, C}, Tensor::Uninit{}), bounds(DType::f64, {T, C});
  std::fill(scores.data<double>(), scores.data<double>() + T * C, -std::numeric_limits<double>::infinity());
  return {std::move(scores), std::move(bounds)};
}

void bind_rows(const std::vector<Row>& rows, const Geometry& g, i64 H, i64 D, const Tensor& block_table, PagedRowsHost& h,
               core::PagedRows& d) {
  const i64 T = static_cast<i64>(rows.size());
  h.w.assign(static_cast<std::size_t>(T * H), 0.0);
  h.b.resize(rows.size());
  h.nvis.resize(rows.size());
  for (std::size_t t = 0; t < rows.size(); ++t) h.b[t] = rows[t].b, h.nvis[t] = rows[t].nvis;
  std::tie(h.scores, h.bounds) = score_buffers(rows);
  d.T = T, d.H = H, d.D = D, d.key_slots = g.nblk * g.bs;
  d.weights = h.w.data();
  d.block_table = block_table.data<std::int32_t>();
  d.B = g.B, d.maxblk = g.maxblk, d.bs = g.bs;
  d.row_b = h.b.data();
  d.row_nvis = h.nvis.data();
  d.C = h.scores.dim(1);
}

RefTensor topk_indices(const Case& c, const std::string& output, Rows rows, i64 k, const RowScorer& scorer, int threads, bool sorted) {
  auto [scores, bounds] = score_buffers(*rows);
  const i64 T = static_cast<i64>(rows->size()), C = scores.dim(1);
  double* sc = scores.data<double>();
  double* bd = bounds.data<double>();
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, threads))
  for (i64 t = 0; t < T; ++t) scorer(t, (*rows)[static_cast<std::size_t>(t)], sc + t * C, bd + t * C);
  return topk_from_scores(c, output, std::move(rows), k, std::move(scores), std::move(bounds), threads, sorted);
}

RefTensor topk_from_scores(const Case& c, const std::string& output, Rows rows, i64 k, Tensor scores, Tensor bounds, int threads,
                           bool sorted) {
  const i64 T = static_cast<i64>(rows->size()), C = scores.dim(1);
  i64 W = k;          // output width: the dumped indices', else sparse_count
  bool flat = false;  // the dumped indices are [T, W] (the op's [T, 1, W] squeezed, as topk_indices[0] of a TND call)
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(output); it != g->end() && it->second.rank() >= 1) {
      W = it->second.dim(-1);
      flat = it->second.rank() == 2;
      break;
    }
  Tensor value = flat ? Tensor(DType::i32, {T, W}, Tensor::Uninit{}) : Tensor(DType::i32, {T, 1, W}, Tensor::Uninit{});
  std::vector<double> kth(static_cast<std::size_t>(T));
  std::vector<i64> len(static_cast<std::size_t>(T));
  const double* sc = scores.data<double>();
  std::int32_t* out = value.data<std::int32_t>();
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::max(1, threads))
  for (i64 t = 0; t < T; ++t) {
    const Row& ri = (*rows)[static_cast<std::size_t>(t)];
    const double* row = sc + t * C;
    len[static_cast<std::size_t>(t)] = ri.nvis;
    const std::vector<i64> sel = engines::topk::topk_canonical(row, ri.nvis, k);
    kth[static_cast<std::size_t>(t)] = ri.nvis <= k ? engines::topk::topk_last_score(row, ri.nvis) : row[sel.back()];
    for (i64 i = 0; i < W; ++i)
      out[t * W + i] = i < static_cast<i64>(sel.size()) ? static_cast<std::int32_t>(sel[static_cast<std::size_t>(i)]) : -1;
  }
  RefTensor r;
  r.name = output;
  r.kind = CompareKind::topk_set;
  r.value = value;
  r.topk.k = k;
  r.topk.len = std::move(len);
  r.topk.scores = scores;
  r.topk.bounds = bounds;
  r.topk.kth = std::move(kth);
  r.topk.to_index = [](i64, i64 q) { return q; };  // per-request key index
  r.topk.from_index = [rows](i64 row, i64 idx) { return idx >= 0 && idx < (*rows)[static_cast<std::size_t>(row)].nvis ? idx : i64{-1}; };
  r.topk.sorted = sorted;       // the Ascend ops sort (descending; Sort32 + MrgSort)
  r.topk.fast_path = false;     // rows with nvis <= k are sorted too
  r.topk.short_rows_hint = "";  // the ops always pad with -1
  r.describe = [rows, W](i64 f) {
    const Row& ri = (*rows)[static_cast<std::size_t>(f / W)];
    return "token " + std::to_string(f / W) + " (request " + std::to_string(ri.b) + ", position " + std::to_string(ri.pos) + ", " +
           std::to_string(ri.nvis) + " visible keys) pos " + std::to_string(f % W);
  };
  return r;
}

RefTensor values_at_indices(const Case& c, const std::string& values, const std::string& indices, const RefTensor& topk) {
  const Tensor* dumped = nullptr;  // the values output whose dtype / shape the reference takes
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(values); it != g->end()) {
      dumped = &it->second;
      break;
    }
  auto it = c.outputs.find(indices);
  const Tensor& idx = it != c.outputs.end() && it->second.numel() == topk.value.numel() ? it->second : topk.value;
  const DType dt = dumped ? dumped->dtype() : DType::f32;
  const int p = dt == DType::fp16 ? 11 : dt == DType::bf16 ? 8 : 24;
  const double sub = dt == DType::fp16 ? std::ldexp(1.0, -24) : dt == DType::bf16 ? std::ldexp(1.0, -133) : std::ldexp(1.0, -149);
  const i64 N = topk.value.numel(), W = topk.value.dim(-1), C = topk.topk.scores.dim(1);
  RefTensor r;
  r.name = values;
  r.kind = CompareKind::bounded;
  r.value = Tensor(dt, topk.value.shape());
  r.magnitude = Tensor(DType::f64, topk.value.shape());
  r.defined = Tensor(DType::u8, topk.value.shape());
  const double* sc = topk.topk.scores.data<double>();
  const double* bd = topk.topk.bounds.data<double>();
  for (i64 f = 0; f < N; ++f) {
    const i64 t = f / W, pos = topk.topk.from_index(t, idx.int_at(f));
    const bool ok = pos >= 0 && pos < C;
    const double v = ok ? sc[t * C + pos] : 0.0, u = ok ? bd[t * C + pos] : 0.0;
    r.value.set_value(f, v);
    r.magnitude.data<double>()[f] = std::isfinite(v) ? u + std::ldexp(std::fabs(v) + u, 1 - p) + sub : 0.0;
    r.defined.data<std::uint8_t>()[f] = ok ? 1 : 0;
  }
  r.describe = topk.describe;
  return r;
}

Tensor shuffled_block_table(Rng r, const std::vector<i64>& blocks, i64 maxblk, i64 nblk) {
  std::vector<std::int32_t> pool(static_cast<std::size_t>(nblk));
  std::iota(pool.begin(), pool.end(), 0);
  for (std::size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[static_cast<std::size_t>(r.randint(0, static_cast<i64>(i) - 1))]);
  const i64 B = static_cast<i64>(blocks.size());
  Tensor bt(DType::i32, {B, maxblk});
  std::size_t next = 0;
  for (i64 b = 0; b < B; ++b)
    for (i64 j = 0; j < maxblk; ++j) bt.data<std::int32_t>()[b * maxblk + j] = j < blocks[static_cast<std::size_t>(b)] ? pool[next++] : 0;
  return bt;
}

}  // namespace dsa::engines::ascend_li
