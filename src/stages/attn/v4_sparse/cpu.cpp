// attn.v4_sparse CPU reference: query rows in parallel, one RowEngine per thread (fixed order per row).
#include <omp.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"
#include "stages/attn/common/head_out.hpp"
#include "stages/attn/v4_sparse/core.hpp"

namespace dsa::attn::v4_sparse {

using i64 = std::int64_t;

void row_keys(const Case& c, const Params& p, i64 t, Bug bug, std::vector<Key>& keys) {
  keys.clear();
  const Row& r = (*p.rows)[static_cast<std::size_t>(t)];
  i64 pos = r.pos;
  if (bug == Bug::chunk_position) {  // the row inside its request
    i64 first = t;
    while (first > 0 && (*p.rows)[static_cast<std::size_t>(first - 1)].b == r.b) --first;
    pos = t - first;
  }
  const i64 kv_len = c.input("seqused_kv").int_at(r.b);
  const Tensor& obt = c.input("ori_block_table");
  auto ori_slot = [&](i64 s) -> i64 {  // -1: not mapped (only reachable under a Bug)
    if (s < 0 || s / p.bs_o >= p.mb_o) return -1;
    const i64 id = obt.int_at(r.b * p.mb_o + s / p.bs_o);
    return id >= 0 && id < p.nb_o ? id * p.bs_o + s % p.bs_o : -1;
  };
  if (bug != Bug::no_window && pos >= 0) {
    i64 lo = std::max<i64>(0, pos - p.win_left - (bug == Bug::window_one_wider ? 1 : 0));
    i64 hi = std::min(pos + p.win_right - (bug == Bug::window_without_current ? 1 : 0), kv_len - 1);
    for (i64 s = lo; s <= hi; ++s)
      if (const i64 sl = ori_slot(s); sl >= 0) keys.push_back({false, sl});
  }
  if (p.ratio <= 1 || bug == Bug::no_cmp || pos + 1 <= 0) return;
  const i64 limit = (pos + 1 + (bug == Bug::cmp_one_group_early ? 1 : 0)) / p.ratio;
  const Tensor& cbt = c.input("cmp_block_table");
  auto cmp_slot = [&](i64 j) -> i64 {
    if (j < 0 || j / p.bs_c >= p.mb_c) return -1;
    const i64 id = cbt.int_at(r.b * p.mb_c + j / p.bs_c);
    return id >= 0 && id < p.nb_c ? id * p.bs_c + j % p.bs_c : -1;
  };
  if (p.K == 0) {
    for (i64 j = 0; j < limit; ++j)
      if (const i64 sl = cmp_slot(j); sl >= 0) keys.push_back({true, sl});
    return;
  }
  const Tensor& idx = c.input("cmp_sparse_indices");
  for (i64 k = 0; k < std::min(p.K, limit); ++k) {
    i64 j = idx.int_at(t * p.K + k);
    if (j == -1) break;
    if (bug == Bug::cmp_window_offset) j -= p.win_left + 1;
    if (j >= limit) continue;  // only under a Bug (parse refuses it otherwise)
    if (const i64 sl = cmp_slot(j); sl >= 0) keys.push_back({true, sl});
  }
}

namespace {

// Row t, heads [h0, h1): the engine over the row's keys (RowEngine e and the buffers are the caller's, per thread);
// put(h, d, value, bound) receives each head's D outputs before the bf16 rounding (NaN heads NaN, lonely rows 0).
template <class Put>
void attend_row(const Case& c, const Params& p, i64 t, i64 h0, i64 h1, Bug bug, RowEngine& e, std::vector<Key>& keys,
                std::vector<double>& vabs, Put put) {
  const i64 D = p.D, H = h1 - h0;
  const std::uint16_t* qb = c.input("q").data<std::uint16_t>();
  const std::uint16_t* ob = c.input("ori_kv").data<std::uint16_t>();
  const Tensor* ckv = c.input_opt("cmp_kv");
  const std::uint16_t* cb = ckv ? ckv->data<std::uint16_t>() : nullptr;
  const Tensor* sink = bug == Bug::sink_dropped ? nullptr : c.input_opt("sinks");
  const bool a3 = p.variant == Variant::ascend_a3;
  row_keys(c, p, t, bug, keys);
  const i64 n = static_cast<i64>(keys.size());
  e.reset(H, D, D, n);
  for (i64 h = 0; h < H; ++h)
    for (i64 d = 0; d < D; ++d) e.q(h)[d] = num::bf16_to_f64(qb[(t * p.N + h0 + h) * D + d]);
  vabs.assign(static_cast<std::size_t>(D), 0.0);
  for (i64 j = 0; j < n; ++j) {
    const std::uint16_t* src = (keys[static_cast<std::size_t>(j)].cmp ? cb : ob) + keys[static_cast<std::size_t>(j)].slot * D;
    double* k = e.key(j);
    for (i64 d = 0; d < D; ++d) {
      k[d] = num::bf16_to_f64(src[d]);
      vabs[static_cast<std::size_t>(d)] += std::fabs(k[d]);
    }
  }
  e.run(p.scale);
  const double nn = static_cast<double>(n), nan = std::numeric_limits<double>::quiet_NaN();
  for (i64 h = 0; h < H; ++h) {
    const HeadResult& r = e.head(h);
    const double s = sink ? static_cast<double>(sink->data<float>()[h0 + h]) : -std::numeric_limits<double>::infinity();
    const double f = sink ? 1.0 / (1.0 + num::det_exp(s - r.lse)) : 1.0;
    if (r.lonely) {  // no key: 0 exactly
      for (i64 d = 0; d < D; ++d) put(h0 + h, d, 0.0, 0.0);
      continue;
    }
    if (r.nan || f != f) {  // a NaN (or +inf) score, or a NaN sink: NaN
      for (i64 d = 0; d < D; ++d) put(h0 + h, d, nan, 0.0);
      continue;
    }
    double rel = e.out_rel(h);
    if (a3) rel += (nn / 16.0 - nn / 64.0) * 0x1p-21;  // rescales per 16-key tile
    if (sink && std::isfinite(s)) {  // a -inf sink is no sink; a +inf one makes f = 0 (out 0 exactly)
      const double ds = a3 ? r.delta + 0x1p-22 * (std::fabs(s) + std::fabs(r.m)) + 0x1p-21
                           : e.lse_bound(h) + 0x1p-22 * (std::fabs(s) + std::fabs(r.lse)) + 0x1p-21;
      rel += 1.5 * (num::det_exp(2.0 * ds) - 1.0) + 0x1p-20;
    }
    const double* ov = e.out(h);
    const double* mg = e.mag(h);
    for (i64 d = 0; d < D; ++d)
      put(h0 + h, d, bug == Bug::sink_in_numerator ? ov[d] * f + (1.0 - f) : ov[d] * f,
          (f == 0 ? 0.0 : mg[d] * f * rel) + 0x1p-126 * (1.0 + vabs[static_cast<std::size_t>(d)]));
  }
}

}  // namespace

std::optional<Hypothesis::Value> element(const Case& c, const Params& p, Bug bug, i64 flat) {
  const i64 t = flat / (p.N * p.D), h = flat / p.D % p.N, dd = flat % p.D;
  if (t < 0 || t >= p.T) return std::nullopt;
  RowEngine e;
  std::vector<Key> keys;
  std::vector<double> vabs;
  Hypothesis::Value v{0, 0};
  attend_row(c, p, t, h, h + 1, bug, e, keys, vabs, [&](i64, i64 d, double val, double m) {
    if (d == dd) v = {static_cast<double>(num::bf16_to_f32(num::f64_to_bf16(val))), m};
  });
  return v;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const i64 T = p.T, N = p.N, D = p.D;
  Tensor out(DType::bf16, {T, N, D}), out_m(DType::f64, {T, N, D});
  std::uint16_t* ob = out.data<std::uint16_t>();
  double* mb = out_m.data<double>();
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
  {
    RowEngine e;
    std::vector<Key> keys;
    std::vector<double> vabs;
#pragma omp for schedule(dynamic, 1)
    for (i64 t = 0; t < T; ++t)
      attend_row(c, p, t, 0, N, bug, e, keys, vabs, [&](i64 h, i64 d, double v, double m) {
        ob[(t * N + h) * D + d] = num::f64_to_bf16(v);
        mb[(t * N + h) * D + d] = m;
      });
  }
  Expected ex;
  RefTensor o = bounded_ref("out", out, out_m);
  o.peers = {flashmla_metric(8e-4, 2.01 / 128, 7e-6)};
  auto rows = p.rows;
  o.describe = [rows, N, D](i64 f) {
    const i64 t = f / (N * D);
    const Row& r = (*rows)[static_cast<std::size_t>(t)];
    return "row " + std::to_string(t) + " (request " + std::to_string(r.b) + ", position " + std::to_string(r.pos) + ") head " +
           std::to_string(f / D % N) + " dim " + std::to_string(f % D);
  };
  ex.tensors = {std::move(o)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::attn::v4_sparse
