// v4.indexer CPU reference: the score job of the case, core::score_thread (the kernel body cuda.cu runs on the
// device) for every visible entry of every row, rows in parallel (each score in one fixed order: any thread count
// gives the same bits), then the top-k selection.
#include <omp.h>

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "stages/v4/indexer/stage.hpp"

namespace dsa::v4::indexer {

namespace {

using i64 = std::int64_t;
namespace li = dsa::engines::ascend_li;

core::A3Consts a3_consts(const Params& p) {
  core::A3Consts k;
  k.g = (li::gamma_n(p.H - 1, std::ldexp(1.0, -24)) + li::gamma_n(p.H - 1, std::ldexp(1.0, -53))) * (1.0 + std::ldexp(1.0, -20));
  return k;
}

core::FlConsts fl_consts(const Params& p) {
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  core::FlConsts k;
  k.ref = p.variant == Variant::ref_bf16;
  k.g_dot = li::gamma_n(p.D - 1, u32);
  k.e_dot = k.ref ? k.g_dot + li::gamma_n(p.D - 1, u64) : std::ldexp(1.0, -10) + li::gamma_n(p.D - 1, u64);
  k.ubf = std::ldexp(1.0, -8);
  k.u32 = u32;
  k.g_head = li::gamma_n(p.H - 1, u32) + li::gamma_n(p.H - 1, u64);
  k.torch = engines::logits::torch_core::consts(engines::logits::torch_core::Form::ragged_bf16, p.H, p.D);
  return k;
}

}  // namespace

Job job_of(const Case& c, const Params& p, Bug bug) {
  Job j;
  const Tensor& weights = c.input("weights");
  const Tensor* ksc = c.input_opt("key_dequant_scale");
  auto rows = std::make_shared<std::vector<Row>>(static_cast<std::size_t>(p.T));
  li::fill_rows(c, li::Call{.row0 = 0, .T = p.T}, p.g, *rows);
  j.rows = rows;
  core::ScoreJob& d = j.job;
  li::bind_rows(*j.rows, p.g, p.H, p.D, c.input("block_table"), j.h, d);
  // [T, H] per-(row, head) operand: a3 wq = fp16(w16 qs16) (core::a3_wq), else the weights widened exactly.
  if (p.variant == Variant::ascend_a3) {
    const std::uint16_t* w16 = weights.data<std::uint16_t>();
    const std::uint16_t* qs16 = c.input("query_dequant_scale").data<std::uint16_t>();
    for (i64 i = 0; i < p.T * p.H; ++i) j.h.w[static_cast<std::size_t>(i)] = core::a3_wq(w16[i], qs16[i], bug == Bug::no_query_scale);
  } else {
    li::widen(weights, 0, p.T * p.H, j.h.w.data());
  }
  d.variant = p.variant;
  d.query = c.input("query").raw();
  d.key = c.input("key").raw();
  d.key_scale = p.variant == Variant::ref_bf16 || !ksc ? nullptr : ksc->raw();
  d.no_key_scale = bug == Bug::no_key_scale;
  d.a3 = a3_consts(p);
  d.a3.relu_after_weighting = bug == Bug::relu_after_weighting;
  d.a3.no_2pow10 = bug == Bug::no_2pow10;
  d.fl = fl_consts(p);
  d.fl.relu_after_weighting = bug == Bug::relu_after_weighting;
  return j;
}

Expected finish(const Case& c, const Params& p, Job& j, int threads) {
  Expected e;
  e.tensors.push_back(li::topk_from_scores(c, "sparse_indices", j.rows, p.k, std::move(j.h.scores), std::move(j.h.bounds), threads, p.sorted));
  if (c.outputs.count("sparse_values") || c.expected.count("sparse_values"))
    e.tensors.push_back(li::values_at_indices(c, "sparse_values", "sparse_indices", e.tensors.front()));
  return e;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  Job j = job_of(c, p, bug);
  const core::ScoreJob& d = j.job;
  const li::core::Elem e = core::fl_elem(d.variant);
  li::score_rows_host(
      d, j.h, threads, [&](i64 t, i64 x, double& s, double& b) { core::score_thread(d, e, t, x, s, b); },
      [&](i64 t, double* scores, double* bounds) {
        if (bug == Bug::chunk_slots)  // chunked prefill: only the chunk's own q_len // 4 entries scored
          for (i64 x = (*j.rows)[static_cast<std::size_t>(t)].qlen / p.g.cmp_ratio; x < d.C; ++x)
            scores[x] = -std::numeric_limits<double>::infinity(), bounds[x] = 0;
      });
  return finish(c, p, j, threads);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer
