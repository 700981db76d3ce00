// indexer.topk — top-k over each row's valid candidate range (spec v32 §5).
// Row r's candidates are positions p < lengths[r], with score logits[r, row_starts[r] + p] (row_starts default 0);
// forced init/local tokens (§5.4) score +inf. Nothing outside the range is read (uncleaned logits are fine).
// Reference for the topk_set comparator (TopkRef): per-row scores (f64), the k-th largest score tau, and the
// index-base transform both ways. `value` is the CANONICAL index tensor i32 [R, W] (W = width of the dumped
// indices, else k): descending score, NaN first, ties by lower position, fast-path rows [0..len-1], -1 padded.
// Kernels are free to emit any order and any tie choice; the order of `value` is canonical only.
#include <omp.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "reference/topk_canonical.hpp"
#include "reference/v32_indexer.hpp"

namespace dsa::ref {

namespace {

enum class IndexBase { relative, ragged_offset, page_slot, absolute };

IndexBase parse_index_base(const std::string& s) {
  if (s == "relative") return IndexBase::relative;
  if (s == "ragged_offset") return IndexBase::ragged_offset;
  if (s == "page_slot") return IndexBase::page_slot;
  if (s == "absolute") return IndexBase::absolute;
  throw std::invalid_argument("index_base must be relative, ragged_offset, page_slot or absolute, found '" + s + "'");
}

// Everything the index transforms need, copied out of the case (the closures outlive it).
struct IndexMap {
  IndexBase base = IndexBase::relative;
  std::vector<std::int64_t> len, start, offset;
  std::vector<std::int64_t> page_table;  // [nq, nb]
  std::int64_t nq = 0, nb = 0, page_size = 64, rows_per_request = 1;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> page_to_block;  // per request, sorted (page, block)

  std::int64_t to_index(std::int64_t r, std::int64_t p) const {
    if (r < 0 || r >= static_cast<std::int64_t>(len.size()) || p < 0 || p >= len[static_cast<std::size_t>(r)]) return -1;
    const auto ru = static_cast<std::size_t>(r);
    switch (base) {
      case IndexBase::relative: return p;
      case IndexBase::ragged_offset: return p + offset[ru];
      case IndexBase::absolute: return start[ru] + p;
      case IndexBase::page_slot: {
        const std::int64_t q = r / rows_per_request, blk = p / page_size;
        if (q >= nq || blk >= nb) return -1;
        const std::int64_t page = page_table[static_cast<std::size_t>(q * nb + blk)];
        return page < 0 ? -1 : page * page_size + p % page_size;
      }
    }
    return -1;
  }

  std::int64_t from_index(std::int64_t r, std::int64_t idx) const {
    if (r < 0 || r >= static_cast<std::int64_t>(len.size()) || idx < 0) return -1;
    const auto ru = static_cast<std::size_t>(r);
    std::int64_t p = -1;
    switch (base) {
      case IndexBase::relative: p = idx; break;
      case IndexBase::ragged_offset: p = idx - offset[ru]; break;
      case IndexBase::absolute: p = idx - start[ru]; break;
      case IndexBase::page_slot: {
        const std::int64_t q = r / rows_per_request;
        if (q >= nq) return -1;
        const auto& m = page_to_block[static_cast<std::size_t>(q)];
        const std::int64_t page = idx / page_size;
        auto it = std::lower_bound(m.begin(), m.end(), std::make_pair(page, std::numeric_limits<std::int64_t>::min()));
        if (it == m.end() || it->first != page) return -1;
        p = it->second * page_size + idx % page_size;
        break;
      }
    }
    return p >= 0 && p < len[ru] ? p : -1;
  }
};

}  // namespace

Expected indexer_topk(const Case& c, const RefOptions& opt) {
  const Tensor& logits = c.input("logits");
  const Tensor& lengths = c.input("lengths");
  const Tensor* row_starts = c.input_opt("row_starts");
  const Tensor* offsets = c.input_opt("offsets");
  const Tensor* page_table = c.input_opt("page_table");
  const std::int64_t R = logits.dim(0), C = logits.dim(1);
  const std::int64_t k = c.attr_int("k", 2048);
  const bool fast_path = c.attr_bool("fast_path", true);
  const std::int64_t n_init = c.attr_int("num_init_tokens", 0), n_local = c.attr_int("num_local_tokens", 0);

  auto map = std::make_shared<IndexMap>();
  map->base = parse_index_base(c.attr_str("index_base", "relative"));
  map->page_size = c.attr_int("page_size", 64);
  map->rows_per_request = c.attr_int("rows_per_request", 1);
  map->len.resize(static_cast<std::size_t>(R));
  map->start.resize(static_cast<std::size_t>(R));
  map->offset.assign(static_cast<std::size_t>(R), 0);
  for (std::int64_t r = 0; r < R; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    map->len[ru] = lengths.int_at(r);
    map->start[ru] = row_starts ? row_starts->int_at(r) : 0;
    if (offsets) map->offset[ru] = offsets->int_at(r);
    if (map->start[ru] < 0 || map->len[ru] < 0 || map->start[ru] + map->len[ru] > C)
      throw SchemaError({c.file, c.name, "inputs/lengths, inputs/row_starts", "0 <= row_start, row_start + length <= C = " + std::to_string(C),
                         "row " + std::to_string(r) + ": start " + std::to_string(map->start[ru]) + " length " + std::to_string(map->len[ru])});
  }
  if (map->base == IndexBase::page_slot) {
    if (!page_table || map->page_size <= 0 || map->rows_per_request <= 0)
      throw SchemaError({c.file, c.name, "inputs/page_table", "a page table, page_size > 0 and rows_per_request > 0 for page_slot", "none"});
    map->nq = page_table->dim(0);
    map->nb = page_table->dim(1);
    map->page_table.resize(static_cast<std::size_t>(map->nq * map->nb));
    for (std::int64_t i = 0; i < map->nq * map->nb; ++i) map->page_table[static_cast<std::size_t>(i)] = page_table->int_at(i);
    // Blocks a request's rows can reach: [0, ceil(max row length / page_size)).
    std::vector<std::int64_t> used(static_cast<std::size_t>(map->nq), 0);
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t q = r / map->rows_per_request;
      if (q < map->nq) {
        auto& u = used[static_cast<std::size_t>(q)];
        u = std::max(u, (map->len[static_cast<std::size_t>(r)] + map->page_size - 1) / map->page_size);
      }
    }
    map->page_to_block.resize(static_cast<std::size_t>(map->nq));
    for (std::int64_t q = 0; q < map->nq; ++q) {
      auto& m = map->page_to_block[static_cast<std::size_t>(q)];
      for (std::int64_t b = 0; b < std::min(used[static_cast<std::size_t>(q)], map->nb); ++b)
        m.emplace_back(map->page_table[static_cast<std::size_t>(q * map->nb + b)], b);
      std::sort(m.begin(), m.end());  // (page, block): a duplicated page resolves to its first block
    }
  }

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
  const float* lg = logits.data<float>();
  double* sc = scores.data<double>();
  std::int32_t* out = value.data<std::int32_t>();
  const IndexMap& mp = *map;
  const double inf = std::numeric_limits<double>::infinity();
  const int threads = opt.thread_count();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t r = 0; r < R; ++r) {
    const auto ru = static_cast<std::size_t>(r);
    const std::int64_t len = mp.len[ru], s0 = mp.start[ru];
    double* row = sc + r * C;
    for (std::int64_t p = 0; p < C; ++p) row[p] = p < len ? static_cast<double>(lg[r * C + s0 + p]) : -inf;
    // §5.4 forced tokens: init positions [0, num_init), local positions [len - num_local, len) -> +inf.
    for (std::int64_t p = 0; p < std::min(n_init, len); ++p) row[p] = inf;
    for (std::int64_t p = std::max<std::int64_t>(len - n_local, 0); p < len; ++p) row[p] = inf;

    std::vector<std::int64_t> sel;
    if (len <= k) {
      kth[ru] = topk_last_score(row, len);
      if (fast_path) {
        sel.resize(static_cast<std::size_t>(len));
        for (std::int64_t p = 0; p < len; ++p) sel[static_cast<std::size_t>(p)] = p;
      } else {
        sel = topk_canonical(row, len, k);
      }
    } else {
      sel = topk_canonical(row, len, k);
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
  t.topk.kth = std::move(kth);
  t.topk.to_index = [map](std::int64_t r, std::int64_t p) { return map->to_index(r, p); };
  t.topk.from_index = [map](std::int64_t r, std::int64_t idx) { return map->from_index(r, idx); };
  t.topk.sorted = c.attr_bool("sorted", false);
  t.topk.fast_path = fast_path;
  t.describe = [W](std::int64_t f) { return "row " + std::to_string(f / W) + " col " + std::to_string(f % W); };
  Expected e;
  e.tensors.push_back(std::move(t));
  return e;
}

}  // namespace dsa::ref
