// indexer.topk — top-k over each row's valid candidate range (spec v32 §5).
// Row r's candidates are positions p < lengths[r], with score logits[r, row_starts[r] + p] (row_starts default 0);
// forced init/local tokens (§5.4) score +inf. Nothing outside the range is read (uncleaned logits are fine).
// Reference for the topk_set comparator (TopkRef): per-row scores (f64), the k-th largest score tau, and the
// index-base transform both ways (src/layouts/index_base.hpp). `value` is the CANONICAL index tensor i32 [R, W]
// (W = width of the dumped indices, else k): descending score, NaN first, ties by lower position, fast-path rows
// [0..len-1], -1 padded. Kernels are free to emit any order and any tie choice; the order of `value` is canonical
// only. Exact (contract way 1: no arithmetic, comparisons of fp32 values widened exactly).
#pragma once
#include <algorithm>
#include <limits>

#include "layouts/index_base.hpp"
#include "stage/stage.hpp"

namespace dsa::indexer::topk {

struct Params : dsa::Params {
  std::int64_t k = 2048;
  layouts::IndexBase index_base = layouts::IndexBase::relative;
  bool sorted = false;
  bool fast_path = true;
  bool short_rows_torch = false;  // attr short_rows=torch
  std::int64_t num_init = 0, num_local = 0;  // §5.4 forced tokens
  std::int64_t page_size = 64, rows_per_request = 1;
};

// The index map of a case (validated by parse: row ranges inside the logits, page_slot tables complete).
layouts::IndexMap index_map(const Case& c, const Params& p);

// Scores of row r's candidates (C entries, -inf past len) with the forced tokens at +inf; `logit(col)` is the row's
// logit at a column, exactly widened (fp32, bf16 or fp16 logits).
template <class Logit>
inline void row_scores(const Logit& logit, std::int64_t start, std::int64_t len, std::int64_t C, const Params& p, double* row) {
  const double inf = std::numeric_limits<double>::infinity();
  for (std::int64_t q = 0; q < C; ++q) row[q] = q < len ? logit(start + q) : -inf;
  for (std::int64_t q = 0; q < std::min(p.num_init, len); ++q) row[q] = inf;
  for (std::int64_t q = std::max<std::int64_t>(len - p.num_local, 0); q < len; ++q) row[q] = inf;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
// The canonical selection of every row computed elsewhere (the CUDA backend): sel [R, k] = the first min(k, len)
// positions in canonical order (-1 after), last [R] = the row's canonical-last position (-1 for an empty row).
struct RowPicks {
  std::vector<std::int32_t> sel, last;
};
// The Expected of a case: the scores, k-th values, canonical indices and index maps; picks (null: computed here with
// engines::topk::topk_canonical) supply the per-row selections.
Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const RowPicks* picks);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the selections on the GPU
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::topk
