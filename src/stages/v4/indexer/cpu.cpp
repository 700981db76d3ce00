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
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53), ubf = std::ldexp(1.0, -8);
  const double g_dot = gamma_n(D - 1, u32), g_head = gamma_n(H - 1, u32) + gamma_n(H - 1, u64);
  const bool ref = p.variant == Variant::ref_bf16;
  for (i64 j = 0; j < ri.nvis; ++j) {
    const i64 slot = li::key_slot(bt, p.g, ri.b, j);
    li::widen(key, slot * D, D, k.data());
    li::heads_dot64(q.data(), k.data(), H, D, dot.data(), abs.data());
    double ks = 1.0;  // DeepGEMM: kv_scale * sum_h w_h relu(q_h . k_j); the reference model has no key scale
    if (!ref && bug != Bug::no_key_scale) li::widen(*ksc, slot, 1, &ks);
    double L = 0, err = 0, mag = 0;
    for (i64 h = 0; h < H; ++h) {
      const std::size_t hh = static_cast<std::size_t>(h);
      const double I = dot[hh], A = abs[hh], r = std::max(I, 0.0), aw = std::fabs(w[hh]);
      L += bug == Bug::relu_after_weighting ? std::max(w[hh] * I, 0.0) : w[hh] * r;  // fixed order h = 0..H-1
      // e: the kernel's dot error (ref-bf16: fp32 dot rounded to bf16; vllm-cuda: the fp8 WGMMA envelope 2^-10 A)
      // plus the reference's own f64 sum
      const double e = ref ? (g_dot + gamma_n(D - 1, u64)) * A + ubf * (std::fabs(I) + g_dot * A)
                           : (std::ldexp(1.0, -10) + gamma_n(D - 1, u64)) * A;
      const double up = ref ? ubf : u32;  // the product's rounding: bf16 tensor (ref-bf16) or fp32
      err += aw * e + up * aw * (r + e);
      mag += aw * (r + e) * (1 + up);
    }
    double u = err + g_head * mag * (1 + u32);
    if (ref) u += ubf * (std::fabs(L) + u);  // the bf16 sum tensor
    L *= ks;
    u = u * std::fabs(ks) + u32 * std::fabs(L);  // the kernel's fp32 multiply by the scale
    score[j] = L;
    bound[j] = std::isfinite(L) ? u * (1.0 + std::ldexp(1.0, -20)) : 0.0;
  }
}

}  // namespace

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
  std::vector<double> wq(static_cast<std::size_t>(H));
  for (i64 h = 0; h < H; ++h) {
    const double prod = static_cast<double>(num::fp16_to_f32(w[h])) *
                        (bug == Bug::no_query_scale ? 1.0 : static_cast<double>(num::fp16_to_f32(qs[h])));  // exact
    wq[static_cast<std::size_t>(h)] = static_cast<double>(num::fp16_to_f32(num::f64_to_fp16(prod)));
  }
  const double g = (gamma_n(H - 1, std::ldexp(1.0, -24)) + gamma_n(H - 1, std::ldexp(1.0, -53))) * (1.0 + std::ldexp(1.0, -20));
  std::vector<std::int32_t> I(static_cast<std::size_t>(H));
  for (i64 j = 0; j < ri.nvis; ++j) {
    const i64 slot = dsa::indexer::ascend_li::key_slot(bt, p.g, ri.b, j);
    heads_dot(q, key + slot * D, H, D, I.data());
    double L = 0, A = 0;
    for (i64 h = 0; h < H; ++h) {
      const double x = static_cast<double>(I[static_cast<std::size_t>(h)]);
      double s;
      double prod;
      if (bug == Bug::relu_after_weighting) {
        s = static_cast<double>(num::fp16_to_f32(num::f64_to_fp16(x * 0x1.0p-10)));
        prod = std::max(wq[static_cast<std::size_t>(h)] * s, 0.0);
      } else {
        const double r = bug == Bug::no_2pow10 ? std::max(x, 0.0) : std::max(x, 0.0) * 0x1.0p-10;  // exact
        s = static_cast<double>(num::fp16_to_f32(num::f64_to_fp16(r)));
        prod = wq[static_cast<std::size_t>(h)] * s;  // exact: fp16 x fp16
      }
      L += prod;  // fixed order h = 0..H-1
      A += std::fabs(prod);
    }
    const double ks = bug == Bug::no_key_scale ? 1.0 : static_cast<double>(num::fp16_to_f32(ksc[slot]));
    const double sc = L * ks;
    score[j] = sc;
    bound[j] = std::isfinite(sc) ? g * A * std::fabs(ks) + std::ldexp(std::fabs(sc), -23) : 0.0;
    if (bug == Bug::chunk_slots && j >= ri.qlen / p.g.cmp_ratio) score[j] = -std::numeric_limits<double>::infinity(), bound[j] = 0;
  }
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  namespace li = dsa::indexer::ascend_li;
  auto rows = std::make_shared<std::vector<Row>>(static_cast<std::size_t>(p.T));
  li::fill_rows(c, li::Call{.row0 = 0, .T = p.T}, p.g, *rows);
  Expected e;
  e.tensors.push_back(li::topk_indices(
      c, "sparse_indices", rows, p.k, [&](i64 t, const Row& ri, double* score, double* bound) { row_scores(c, p, ri, t, bug, score, bound); },
      threads, p.sorted));
  if (c.outputs.count("sparse_values") || c.expected.count("sparse_values"))
    e.tensors.push_back(li::values_at_indices(c, "sparse_values", "sparse_indices", e.tensors.front()));
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer
