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

// g(n, u) = n u / (1 - n u): the any-order summation factor of n additions.
double gamma_n(i64 n, double u) { return static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u); }

}  // namespace

void row_scores(const Case& c, const Params& p, const Row& ri, i64 t, Bug bug, double* score, double* bound) {
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
      threads));
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer
