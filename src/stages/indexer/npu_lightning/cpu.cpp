// indexer.npu_lightning CPU reference: rows in parallel (each row independent; one fixed summation order: any thread
// count gives the same bits).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "numerics/formats.hpp"
#include "stages/indexer/npu_lightning/core.hpp"
#include "stages/indexer/npu_lightning/score_core.hpp"

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

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const i64 H = p.H, D = p.D;
  const Tensor& query = c.input("query");
  const Tensor& key = c.input("key");
  const Tensor& weights = c.input("weights");
  const std::int32_t* bt = c.input("block_table").data<std::int32_t>();
  core::Consts kc = consts(p);
  kc.relu_after_weighting = bug == Bug::relu_after_weighting;
  auto scorer = [&](i64 t, const engines::ascend_li::Row& ri, double* score, double* bound) {
    std::vector<double> q(static_cast<std::size_t>(H * D)), w(static_cast<std::size_t>(H)), k(static_cast<std::size_t>(D));
    std::vector<double> dot(static_cast<std::size_t>(H)), abs(static_cast<std::size_t>(H));
    engines::ascend_li::widen(query, t * H * D, H * D, q.data());
    engines::ascend_li::widen(weights, t * H, H, w.data());
    if (bug == Bug::weights_ignored) std::fill(w.begin(), w.end(), 1.0);
    for (i64 j = 0; j < ri.nvis; ++j) {
      engines::ascend_li::widen(key, engines::ascend_li::key_slot(bt, p.g, ri.b, j) * D, D, k.data());
      engines::ascend_li::heads_dot64(q.data(), k.data(), H, D, dot.data(), abs.data());
      core::Acc acc;
      for (i64 h = 0; h < H; ++h) {
        const std::size_t hh = static_cast<std::size_t>(h);
        core::head(acc, dot[hh], abs[hh], w[hh], kc);  // fixed order h = 0..H-1
      }
      core::finish(acc, kc, score[j], bound[j]);
    }
  };
  auto rows = std::make_shared<std::vector<engines::ascend_li::Row>>(rows_of(c, p));
  Expected e;
  e.tensors.push_back(engines::ascend_li::topk_indices(c, "sparse_indices", rows, p.k, scorer, threads));
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::indexer::npu_lightning
