// What the Ascend lightning-indexer ops share (npu_lightning_indexer, V3.2 bf16; npu_vllm_quant_lightning_indexer,
// V4 int8): TND query rows grouped into requests by actual_seq_lengths_query (prefix sums without the leading 0),
// actual_seq_lengths_key (the uncompressed kv length per request), a PA_BSND key cache read through block_table, the
// sparse_mode 3 visibility nvis = (p + 1) // cmp_ratio at position p = kv_len - q_len + i, and the sorted, -1 padded
// sparse_indices output judged by the tie-aware top-k comparator with per-candidate score bounds.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "numerics/rng.hpp"
#include "engines/ascend_li/ascend_li_core.hpp"
#include "stage/stage.hpp"

namespace dsa::engines::ascend_li {

// Query row t's request, position, visible count and request length.
struct Row {
  std::int64_t b = 0, pos = 0, nvis = 0, qlen = 0;
};
using Rows = std::shared_ptr<const std::vector<Row>>;

// The metadata of one op call over query rows [row0, row0 + T) (a context-parallel half is one call).
struct Call {
  std::string aq_name = "actual_seq_lengths_query", ak_name = "actual_seq_lengths_key";
  std::int64_t row0 = 0, T = 0;
};

struct Geometry {
  std::int64_t B = 0, nblk = 0, bs = 0, maxblk = 0, cmp_ratio = 1;
  std::int64_t max_nvis = 0;  // the largest visible count any row may get (the score buffer width)
};

// Checks one call's metadata (prefix sums ending at T, kv lengths, block ids of the blocks a request reads) against
// the block table; raises g.max_nvis. Returns false (problems appended) on the first inconsistency.
bool parse_call(const Case& c, const Call& call, Geometry& g, std::vector<Problem>& pr);
// Writes rows[call.row0 .. call.row0 + call.T) from the call's metadata (validated by parse_call).
void fill_rows(const Case& c, const Call& call, const Geometry& g, std::vector<Row>& rows);
// "last dim >= sparse_count" for a dumped index output.
void check_width(const Case& c, const std::string& output, std::int64_t k, std::vector<Problem>& pr);
// Flat cache slot of request b's j-th visible key (core::key_slot).
inline std::int64_t key_slot(const std::int32_t* bt, const Geometry& g, std::int64_t b, std::int64_t j) {
  return core::key_slot(bt, g.maxblk, g.bs, b, j);
}

// The element kind of a scored tensor (bf16, fp16, f32, e4m3fn, int8) for core::widen.
core::Elem elem_of(const Tensor& t);
// n elements of t from flat `offset` as f64 (exact): bf16, fp16, f32, e4m3fn, int8 (core::widen).
void widen(const Tensor& t, std::int64_t offset, std::int64_t n, double* dst);
// dot[h] = sum_d q[h, d] k[d] (f64, fixed order d = 0..D-1) and abs[h] = sum_d |q[h, d] k[d]| for every head (the
// products exact when q and k have at most 26 significant bits each): core::dot64 per head.
void heads_dot64(const double* q, const double* k, std::int64_t H, std::int64_t D, double* dot, double* abs);
using core::gamma_n;

// Scores (f64) and bounds of row t's visible keys 0..nvis-1 (the rest stays -inf / 0).
using RowScorer = std::function<void(std::int64_t t, const Row& r, double* score, double* bound)>;
// The reference sparse_indices [T, 1, W] ([T, W] when the dump's is; W = the dumped width, else k): per row the top k by score, descending,
// ties to the lower index, -1 padded, all -1 when nvis <= 0; with the scores and bounds the comparator judges by.
// sorted = false: any order of the selected set is accepted.
RefTensor topk_indices(const Case& c, const std::string& output, Rows rows, std::int64_t k, const RowScorer& scorer,
                       int threads, bool sorted = true);
// The score and bound tensors topk_indices fills: f64 [T, C], C = max(1, the rows' largest nvis); scores -inf,
// bounds 0 (a backend fills the visible keys of every row, then calls topk_from_scores).
std::pair<Tensor, Tensor> score_buffers(const std::vector<Row>& rows);
// The host side of a core::PagedRows job: each row's request and visible count, the [T, H] weights operand (sized
// here, filled by the stage) and the score / bound buffers (score_buffers).
struct PagedRowsHost {
  std::vector<double> w;
  std::vector<std::int64_t> b, nvis;
  Tensor scores, bounds;
};
// Fills h from rows and points d at it: T, H, D, the cache's key slots and block table (g), weights, rows, C.
void bind_rows(const std::vector<Row>& rows, const Geometry& g, std::int64_t H, std::int64_t D, const Tensor& block_table,
               PagedRowsHost& h, core::PagedRows& d);
// The host side of a scorer's kernel body: thread(t, x, score, bound) for every row t < d.T and position x < d.C of
// h's [T, C] score / bound buffers, rows in parallel (one row's scores are independent of the others: any thread count
// gives the same bits), then row_done(t, scores_row, bounds_row) (the selftest's row-level bugs; may do nothing).
template <class Thread, class RowDone>
void score_rows_host(const core::PagedRows& d, PagedRowsHost& h, int threads, Thread thread, RowDone row_done) {
  double* scores = h.scores.data<double>();
  double* bounds = h.bounds.data<double>();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : 1)
  for (std::int64_t t = 0; t < d.T; ++t) {
    for (std::int64_t x = 0; x < d.C; ++x) thread(t, x, scores[t * d.C + x], bounds[t * d.C + x]);
    row_done(t, scores + t * d.C, bounds + t * d.C);
  }
}
// topk_indices once the scores and bounds (from score_buffers) are filled: the selection, k-th values, index maps.
RefTensor topk_from_scores(const Case& c, const std::string& output, Rows rows, std::int64_t k, Tensor scores, Tensor bounds,
                           int threads, bool sorted = true);

// The reference of a values output (the ops' return_value scores, [T, 1, W] or [T, W], f32 / fp16 / bf16) beside an
// index output judged by `topk` (from topk_indices): at every position whose index -- the dumped one (outputs/
// <indices>), else the reference's own -- is a visible key of its row, the reference score of that key rounded once to
// the values' dtype, with magnitude M = its bound plus one ulp of the dtype (policy derived-bound); positions with -1
// or an index that is not a candidate are not compared (the indices' own check reports them).
RefTensor values_at_indices(const Case& c, const std::string& values, const std::string& indices, const RefTensor& topk);

// Generators: a block table [B, maxblk] giving request b blocks[b] distinct block ids of [0, nblk) drawn from a pool
// shuffled by `r` (the unused columns 0).
Tensor shuffled_block_table(Rng r, const std::vector<std::int64_t>& blocks, std::int64_t maxblk, std::int64_t nblk);

}  // namespace dsa::engines::ascend_li
