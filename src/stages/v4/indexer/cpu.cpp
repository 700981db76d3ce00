// v4.indexer CPU reference: rows in parallel (each row independent; scores in one fixed order: any thread count gives
// the same bits).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "stages/v4/indexer/core.hpp"

namespace dsa::v4::indexer {

namespace {

using i64 = std::int64_t;

// I[h] = sum_d q[h, d] * k[d] for every head: exact int32 (|I| <= D * 2^14 < 2^31 for D <= 2^16, checked by parse).
// Compiled for AVX2 and baseline (same integers).
__attribute__((target_clones("avx2", "default"))) void heads_dot(const std::int8_t* q, const std::int8_t* k, i64 H, i64 D,
                                                                  std::int32_t* out) {
  for (i64 h = 0; h < H; ++h) {
    std::int32_t acc = 0;
    const std::int8_t* qh = q + h * D;
#pragma omp simd reduction(+ : acc)
    for (i64 d = 0; d < D; ++d) acc += static_cast<std::int32_t>(qh[d]) * static_cast<std::int32_t>(k[d]);
    out[h] = acc;
  }
}

using dsa::indexer::ascend_li::gamma_n;

// The vllm-cuda and ref-bf16 scores (core.hpp): f64 dots of the decoded rows, the variant's bound.
void float_scores(const Case& c, const Params& p, const Row& ri, i64 t, Bug bug, double* score, double* bound) {
  namespace li = dsa::indexer::ascend_li;
  const i64 H = p.H, D = p.D;
  const Tensor& key = c.input("key");
  const Tensor* ksc = c.input_opt("key_dequant_scale");
  const std::int32_t* bt = c.input("block_table").data<std::int32_t>();
  std::vector<double> q(static_cast<std::size_t>(H * D)), w(static_cast<std::size_t>(H)), k(static_cast<std::size_t>(D));
  std::vector<double> dot(static_cast<std::size_t>(H)), abs(static_cast<std::size_t>(H));
  li::widen(c.input("query"), t * H * D, H * D, q.data());
  li::widen(c.input("weights"), t * H, H, w.data());
  core::FlConsts kc = fl_consts(p);
  kc.relu_after_weighting = bug == Bug::relu_after_weighting;
  for (i64 j = 0; j < ri.nvis; ++j) {
    const i64 slot = li::key_slot(bt, p.g, ri.b, j);
    li::widen(key, slot * D, D, k.data());
    li::heads_dot64(q.data(), k.data(), H, D, dot.data(), abs.data());
    double ks = 1.0;  // DeepGEMM: kv_scale * sum_h w_h relu(q_h . k_j); the reference model has no key scale
    if (!kc.ref && bug != Bug::no_key_scale) li::widen(*ksc, slot, 1, &ks);
    core::FlAcc acc;
    for (i64 h = 0; h < H; ++h) {
      const std::size_t hh = static_cast<std::size_t>(h);
      core::fl_head(acc, dot[hh], abs[hh], w[hh], kc);  // fixed order h = 0..H-1
    }
    core::fl_finish(acc, ks, kc, score[j], bound[j]);
  }
}

}  // namespace

core::A3Consts a3_consts(const Params& p) {
  core::A3Consts k;
  k.g = (gamma_n(p.H - 1, std::ldexp(1.0, -24)) + gamma_n(p.H - 1, std::ldexp(1.0, -53))) * (1.0 + std::ldexp(1.0, -20));
  return k;
}

core::FlConsts fl_consts(const Params& p) {
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  core::FlConsts k;
  k.ref = p.variant == Variant::ref_bf16;
  k.g_dot = gamma_n(p.D - 1, u32);
  k.e_dot = k.ref ? k.g_dot + gamma_n(p.D - 1, u64) : std::ldexp(1.0, -10) + gamma_n(p.D - 1, u64);
  k.ubf = std::ldexp(1.0, -8);
  k.u32 = u32;
  k.g_head = gamma_n(p.H - 1, u32) + gamma_n(p.H - 1, u64);
  return k;
}

void row_scores(const Case& c, const Params& p, const Row& ri, i64 t, Bug bug, double* score, double* bound) {
  if (p.variant != Variant::ascend_a3) {
    float_scores(c, p, ri, t, bug, score, bound);
    if (bug == Bug::chunk_slots)
      for (i64 j = ri.qlen / p.g.cmp_ratio; j < ri.nvis; ++j) score[j] = -std::numeric_limits<double>::infinity(), bound[j] = 0;
    return;
  }
  const i64 H = p.H, D = p.D;
  const std::int8_t* q = c.input("query").data<std::int8_t>() + t * H * D;
  const std::uint16_t* w = c.input("weights").data<std::uint16_t>() + t * H;
  const std::uint16_t* qs = c.input("query_dequant_scale").data<std::uint16_t>() + t * H;
  const std::int8_t* key = c.input("key").data<std::int8_t>();
  const std::uint16_t* ksc = c.input("key_dequant_scale").data<std::uint16_t>();
  const std::int32_t* bt = c.input("block_table").data<std::int32_t>();
  core::A3Consts kc = a3_consts(p);
  kc.relu_after_weighting = bug == Bug::relu_after_weighting;
  kc.no_2pow10 = bug == Bug::no_2pow10;
  std::vector<double> wq(static_cast<std::size_t>(H));
  for (i64 h = 0; h < H; ++h) wq[static_cast<std::size_t>(h)] = core::a3_wq(w[h], qs[h], bug == Bug::no_query_scale);
  std::vector<std::int32_t> I(static_cast<std::size_t>(H));
  for (i64 j = 0; j < ri.nvis; ++j) {
    const i64 slot = dsa::indexer::ascend_li::key_slot(bt, p.g, ri.b, j);
    heads_dot(q, key + slot * D, H, D, I.data());
    core::A3Acc acc;
    for (i64 h = 0; h < H; ++h) core::a3_head(acc, I[static_cast<std::size_t>(h)], wq[static_cast<std::size_t>(h)], kc);  // h = 0..H-1
    const double ks = bug == Bug::no_key_scale ? 1.0 : core::fp16_f64(ksc[slot]);
    core::a3_finish(acc, ks, kc, score[j], bound[j]);
    if (bug == Bug::chunk_slots && j >= ri.qlen / p.g.cmp_ratio) score[j] = -std::numeric_limits<double>::infinity(), bound[j] = 0;
  }
}

Expected assemble(const Case& c, RefTensor indices) {
  Expected e;
  e.tensors.push_back(std::move(indices));
  if (c.outputs.count("sparse_values") || c.expected.count("sparse_values"))
    e.tensors.push_back(dsa::indexer::ascend_li::values_at_indices(c, "sparse_values", "sparse_indices", e.tensors.front()));
  return e;
}

std::shared_ptr<const std::vector<Row>> rows_of(const Case& c, const Params& p) {
  auto rows = std::make_shared<std::vector<Row>>(static_cast<std::size_t>(p.T));
  dsa::indexer::ascend_li::fill_rows(c, dsa::indexer::ascend_li::Call{.row0 = 0, .T = p.T}, p.g, *rows);
  return rows;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  return assemble(c, dsa::indexer::ascend_li::topk_indices(
                         c, "sparse_indices", rows_of(c, p), p.k,
                         [&](i64 t, const Row& ri, double* score, double* bound) { row_scores(c, p, ri, t, bug, score, bound); }, threads,
                         p.sorted));
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer
