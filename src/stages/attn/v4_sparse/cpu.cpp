// attn.v4_sparse reference: query rows in parallel on the row engine of the chosen backend (fixed order per row,
// the same bits on both: sparse_attn_rows.hpp).
#include <omp.h>

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "numerics/det_math.hpp"
#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "engines/sparse_attn/head_out.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"
#include "engines/sparse_attn/sparse_attn_rows.hpp"
#include "stages/attn/v4_sparse/stage.hpp"

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

// Row t's outputs of heads [h0, h1) from the engine's results over the row's keys (v: heads 0.. = h0..):
// put(h, d, value, bound) receives each head's D outputs before the bf16 rounding (NaN heads NaN, lonely rows 0).
template <class Put>
void finish_row(const Case& c, const Params& p, i64 h0, i64 h1, Bug bug, const RowView& v, Put put) {
  const i64 D = p.D, H = h1 - h0;
  const Tensor* sink = bug == Bug::sink_dropped ? nullptr : c.input_opt("sinks");
  const bool a3 = p.variant == Variant::ascend_a3;
  const double nn = static_cast<double>(v.n()), nan = std::numeric_limits<double>::quiet_NaN();
  for (i64 h = 0; h < H; ++h) {
    const HeadResult& r = v.head(h);
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
    double rel = v.out_rel(h);
    if (a3) rel += (nn / 16.0 - nn / 64.0) * 0x1p-21;  // rescales per 16-key tile
    if (sink && std::isfinite(s)) {  // a -inf sink is no sink; a +inf one makes f = 0 (out 0 exactly)
      const double ds = a3 ? r.delta + 0x1p-22 * (std::fabs(s) + std::fabs(r.m)) + 0x1p-21
                           : v.lse_bound(h) + 0x1p-22 * (std::fabs(s) + std::fabs(r.lse)) + 0x1p-21;
      rel += 1.5 * (num::det_exp(2.0 * ds) - 1.0) + 0x1p-20;
    }
    const double* ov = v.out(h);
    const double* mg = v.mag(h);
    for (i64 d = 0; d < D; ++d)
      put(h0 + h, d, bug == Bug::sink_in_numerator ? ov[d] * f + (1.0 - f) : ov[d] * f,
          (f == 0 ? 0.0 : mg[d] * f * rel) + 0x1p-126 * (1.0 + v.vabs[d]));
  }
}

// Key ids of the row engine: ori_kv rows first (slot), then cmp_kv rows (ori rows + slot).
i64 key_id(const Params& p, const Key& k) { return k.cmp ? p.nb_o * p.bs_o + k.slot : k.slot; }

// The row engine's key values: ori_kv rows, then cmp_kv rows (the tensors resolved once, not per key).
struct KeyValues {
  const std::uint16_t *ori, *cmp;
  i64 nori, D;
  KeyValues(const Case& c, const Params& p)
      : ori(c.input("ori_kv").data<std::uint16_t>()),
        cmp(c.input_opt("cmp_kv") ? c.input_opt("cmp_kv")->data<std::uint16_t>() : nullptr),  // absent: SWA only
        nori(p.nb_o * p.bs_o),
        D(p.D) {}
  void operator()(i64 id, double* k) const {
    if (id >= nori && !cmp) throw std::logic_error("attn.v4_sparse: a compressed key without cmp_kv (parse admits none)");
    const std::uint16_t* src = id < nori ? ori + id * D : cmp + (id - nori) * D;
    num::bf16_to_f64_n(src, D, k);
  }
};

}  // namespace

std::optional<Hypothesis::Value> element(const Case& c, const Params& p, Bug bug, i64 flat) {
  const i64 t = flat / (p.N * p.D), h = flat / p.D % p.N, dd = flat % p.D;
  if (t < 0 || t >= p.T) return std::nullopt;
  RowEngine e;  // one head of one row
  std::vector<Key> keys;
  row_keys(c, p, t, bug, keys);
  const i64 n = static_cast<i64>(keys.size());
  e.reset(1, p.D, p.D, n);
  const std::uint16_t* qb = c.input("q").data<std::uint16_t>();
  num::bf16_to_f64_n(qb + (t * p.N + h) * p.D, p.D, e.q(0));
  std::vector<double> vabs(static_cast<std::size_t>(p.D), 0.0);
  const KeyValues kv(c, p);
  for (i64 j = 0; j < n; ++j) {
    double* k = e.key(j);
    kv(key_id(p, keys[static_cast<std::size_t>(j)]), k);
    num::add_abs_n(k, p.D, vabs.data());
  }
  e.run(p.scale);
  RowView v = e.view();
  v.vabs = vabs.data();
  Hypothesis::Value val{0, 0};
  finish_row(c, p, h, h + 1, bug, v, [&](i64, i64 d, double x, double m) {
    if (d == dd) val = {static_cast<double>(num::bf16_to_f32(num::f64_to_bf16(x))), m};
  });
  return val;
}

Expected run_on(const Case& c, const Params& p, Bug bug, int threads, Backend backend) {
  const i64 T = p.T, N = p.N, D = p.D;
  Tensor out(DType::bf16, {T, N, D}), out_m(DType::f64, {T, N, D});
  std::uint16_t* ob = out.data<std::uint16_t>();
  double* mb = out_m.data<double>();
  RowSource src;
  src.R = T, src.H = N, src.D = D, src.dv = D;
  src.q = c.input("q").data<std::uint16_t>();
  src.sm = p.scale;
  src.vabs = true;
  src.ids = [&](i64 t, std::vector<i64>& ids) {
    std::vector<Key> keys;
    row_keys(c, p, t, bug, keys);
    for (const Key& k : keys) ids.push_back(key_id(p, k));
  };
  src.key = KeyValues(c, p);
  src.keys_bf16 = true;  // ori_kv / cmp_kv are bf16 tensors
  src.id_space = p.nb_o * p.bs_o + p.nb_c * p.bs_c;
  run_rows(src, backend, threads > 0 ? threads : omp_get_max_threads(), [&](i64 t, const RowView& v) {
    finish_row(c, p, 0, N, bug, v, [&](i64 h, i64 d, double val, double m) {
      ob[(t * N + h) * D + d] = num::f64_to_bf16(val);
      mb[(t * N + h) * D + d] = m;
    });
  });
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

Expected run(const Case& c, const Params& p, Bug bug, int threads) { return run_on(c, p, bug, threads, Backend::cpu); }
Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run_on(c, p, Bug::none, opt.thread_count(), Backend::cpu); }

}  // namespace dsa::attn::v4_sparse
