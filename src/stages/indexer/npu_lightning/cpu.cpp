// indexer.npu_lightning CPU reference: the score job of the case, core::score_thread (the kernel body cuda.cu runs on
// the device) for every visible key of every row, rows in parallel (each score in one fixed order: any thread count
// gives the same bits), then the top-k selection.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "numerics/formats.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"

namespace dsa::indexer::npu_lightning {

namespace {

using i64 = std::int64_t;
using engines::ascend_li::gamma_n;

}  // namespace

std::vector<engines::ascend_li::Call> calls_of(const Params& p) {
  if (!p.cp) return {engines::ascend_li::Call{.row0 = 0, .T = p.T}};
  const i64 half = (p.T + 1) / 2;
  return {engines::ascend_li::Call{.row0 = 0, .T = half},
          engines::ascend_li::Call{.aq_name = "actual_seq_lengths_query_next", .ak_name = "actual_seq_lengths_key_next", .row0 = half, .T = p.T - half}};
}

std::vector<engines::ascend_li::Row> rows_of(const Case& c, const Params& p, bool use_positions) {
  std::vector<engines::ascend_li::Row> rows(static_cast<std::size_t>(p.T));
  for (const auto& call : calls_of(p)) engines::ascend_li::fill_rows(c, call, p.g, rows);
  if (const Tensor* pos = use_positions ? c.input_opt("positions") : nullptr)
    for (i64 t = 0; t < p.T; ++t) {
      auto& r = rows[static_cast<std::size_t>(t)];
      r.pos = pos->int_at(t);
      r.nvis = r.pos + 1 > 0 ? (r.pos + 1) / p.g.cmp_ratio : 0;
    }
  return rows;
}

core::Consts consts(const Params& p) {
  const i64 H = p.H, D = p.D;
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  // the kernel's head-sum depth: 16 lanes of H/16 heads each, then a 4-level tree (ascend-a3); any order otherwise
  const i64 depth = !p.a950 && H % 16 == 0 ? H / 16 - 1 + 4 : H - 1;
  core::Consts k;
  k.g_dot = gamma_n(D - 1, u32) + gamma_n(D - 1, u64);
  k.u_sum = u32 + u64;
  k.g_head = (gamma_n(depth, u32) + gamma_n(H - 1, u64)) * (1.0 + u32);
  k.tiny = static_cast<double>(D * H + 2 * H + 2) * std::ldexp(1.0, -149);  // fp32 underflow, absolute
  k.a950 = p.a950;
  return k;
}

Job job_of(const Case& c, const Params& p, Bug bug) {
  Job j;
  const Tensor& query = c.input("query");
  auto rows = std::make_shared<std::vector<engines::ascend_li::Row>>(rows_of(c, p));
  j.rows = rows;
  core::ScoreJob& d = j.job;
  engines::ascend_li::bind_rows(*j.rows, p.g, p.H, p.D, c.input("block_table"), j.h, d);
  engines::ascend_li::widen(c.input("weights"), 0, p.T * p.H, j.h.w.data());
  if (bug == Bug::weights_ignored) std::fill(j.h.w.begin(), j.h.w.end(), 1.0);
  d.query = query.raw();
  d.key = c.input("key").raw();
  d.elem = engines::ascend_li::elem_of(query);  // the key's too (parse: one dtype)
  d.k = consts(p);
  d.k.relu_after_weighting = bug == Bug::relu_after_weighting;
  return j;
}

Expected finish(const Case& c, const Params& p, Job& j, int threads) {
  Expected e;
  e.tensors.push_back(engines::ascend_li::topk_from_scores(c, "sparse_indices", j.rows, p.k, std::move(j.h.scores), std::move(j.h.bounds), threads));
  return e;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  Job j = job_of(c, p, bug);
  const core::ScoreJob& d = j.job;
  engines::ascend_li::score_rows_host(
      d, j.h, threads, [&](i64 t, i64 x, double& s, double& b) { core::score_thread(d, d.elem, t, x, s, b); },
      [](i64, double*, double*) {});
  return finish(c, p, j, threads);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::indexer::npu_lightning
