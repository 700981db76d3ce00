// indexer.topk CPU reference: rows in parallel (each row independent).
#include <omp.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engines/topk/topk_canonical.hpp"
#include "stages/indexer/topk/stage.hpp"

namespace dsa::indexer::topk {

layouts::IndexMap index_map(const Case& c, const Params& p) {
  const Tensor& lengths = c.input("lengths");
  const Tensor* row_starts = c.input_opt("row_starts");
  const Tensor* offsets = c.input_opt("offsets");
  const Tensor* page_table = c.input_opt("page_table");
  const std::int64_t R = lengths.numel();
  layouts::IndexMap m;
  m.base = p.index_base;
  m.page_size = p.page_size;
  m.rows_per_request = p.rows_per_request;
  m.len.resize(static_cast<std::size_t>(R));
  m.start.resize(static_cast<std::size_t>(R));
  m.offset.assign(static_cast<std::size_t>(R), 0);
  for (std::int64_t r = 0; r < R; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    m.len[ru] = lengths.int_at(r);
    m.start[ru] = row_starts ? row_starts->int_at(r) : 0;
    if (offsets) m.offset[ru] = offsets->int_at(r);
  }
  if (m.base == layouts::IndexBase::page_slot) {
    m.nq = page_table->dim(0);
    m.nb = page_table->dim(1);
    m.page_table.resize(static_cast<std::size_t>(m.nq * m.nb));
    for (std::int64_t i = 0; i < m.nq * m.nb; ++i) m.page_table[static_cast<std::size_t>(i)] = page_table->int_at(i);
    m.index_pages();
  }
  return m;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return assemble(c, p, opt, nullptr); }

Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const RowPicks* picks) {
  const Tensor& logits = c.input("logits");
  const std::int64_t R = logits.dim(0), C = logits.dim(1);
  auto map = std::make_shared<const layouts::IndexMap>(index_map(c, p));

  const std::int64_t k = p.k;
  // Output width: the dumped indices' width, else k.
  std::int64_t W = k;
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find("indices"); it != g->end() && it->second.rank() == 2) {
      W = it->second.dim(1);
      break;
    }

  Tensor scores(DType::f64, {R, C});
  Tensor value(DType::i32, {R, W});
  std::vector<double> kth(static_cast<std::size_t>(R));
  const bool f32 = logits.dtype() == DType::f32;
  const float* lg = f32 ? logits.data<float>() : nullptr;
  double* sc = scores.data<double>();
  std::int32_t* out = value.data<std::int32_t>();
  const layouts::IndexMap& mp = *map;
  const double inf = std::numeric_limits<double>::infinity();
  const int threads = opt.thread_count();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t r = 0; r < R; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const std::int64_t len = mp.len[ru], s0 = mp.start[ru];
    double* row = sc + r * C;
    if (f32) row_scores([&](std::int64_t col) { return static_cast<double>(lg[r * C + col]); }, s0, len, C, p, row);
    else row_scores([&](std::int64_t col) { return logits.value(r * C + col); }, s0, len, C, p, row);

    // The canonical first min(k, len) positions: computed here, or by another backend (picks, same order).
    auto canonical = [&]() {
      if (!picks) return engines::topk::topk_canonical(row, len, k);
      std::vector<std::int64_t> v;
      for (std::int64_t j = 0; j < std::min(k, len); ++j) v.push_back(picks->sel[static_cast<std::size_t>(r * k + j)]);
      return v;
    };
    std::vector<std::int64_t> sel;
    if (len <= k) {
      kth[ru] = picks ? (len > 0 ? row[picks->last[ru]] : -inf) : engines::topk::topk_last_score(row, len);
      if (p.fast_path) {
        sel.resize(static_cast<std::size_t>(len));
        for (std::int64_t q = 0; q < len; ++q) sel[static_cast<std::size_t>(q)] = q;
      } else {
        sel = canonical();
      }
    } else {
      sel = canonical();
      kth[ru] = sel.empty() ? -inf : row[sel.back()];
    }
    for (std::int64_t j = 0; j < W; ++j)
      out[r * W + j] = j < static_cast<std::int64_t>(sel.size())
                           ? static_cast<std::int32_t>(mp.to_index(r, sel[static_cast<std::size_t>(j)]))
                           : -1;
  }

  RefTensor t;
  t.name = "indices";
  t.kind = CompareKind::topk_set;
  t.value = value;
  t.topk.k = k;
  t.topk.len = map->len;
  t.topk.scores = scores;
  // In a layer chain the logits are the upstream reference's and the kernel's own may lie within the upstream bound:
  // each candidate's band is that bound (forced tokens, at +inf, are exact).
  if (auto ib = opt.input_bounds.find("logits"); ib != opt.input_bounds.end() && ib->second.numel() == R * C) {
    Tensor bd(DType::f64, {R, C});
    for (std::int64_t r = 0; r < R; ++r) {
      const auto ru = static_cast<std::size_t>(r);
      for (std::int64_t q = 0; q < C; ++q) {
        const double s = sc[r * C + q];
        bd.data<double>()[r * C + q] = q < mp.len[ru] && s != inf ? ib->second.value(r * C + mp.start[ru] + q) : 0.0;
      }
    }
    t.topk.bounds = bd;
  }
  t.topk.kth = std::move(kth);
  t.topk.to_index = [map](std::int64_t r, std::int64_t q) { return map->to_index(r, q); };
  t.topk.from_index = [map](std::int64_t r, std::int64_t idx) { return map->from_index(r, idx); };
  t.topk.sorted = p.sorted;
  t.topk.fast_path = p.fast_path;
  t.topk.short_rows_torch = p.short_rows_torch;
  // Hints: the same rows read through every other index base these inputs make possible.
  for (std::size_t b = 0; b < layouts::index_base_names().size(); ++b) {
    Params q = p;
    q.index_base = static_cast<layouts::IndexBase>(b);
    if (q.index_base == p.index_base || (q.index_base == layouts::IndexBase::ragged_offset && !c.input_opt("offsets")) ||
        (q.index_base == layouts::IndexBase::page_slot && !c.input_opt("page_table")))
      continue;
    auto other = std::make_shared<const layouts::IndexMap>(index_map(c, q));
    t.topk.other_bases.emplace_back(layouts::index_base_names()[b],
                                    [other](std::int64_t r, std::int64_t idx) { return other->from_index(r, idx); });
  }
  t.describe = [W](std::int64_t f) { return "row " + std::to_string(f / W) + " col " + std::to_string(f % W); };
  Expected e;
  e.tensors.push_back(std::move(t));
  return e;
}

}  // namespace dsa::indexer::topk
