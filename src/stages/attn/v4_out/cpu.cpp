// attn.v4_out CPU reference: tokens in parallel; exact products, fixed-order f64 sums, one bf16 rounding per output.
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "stages/attn/common/head_out.hpp"
#include "stages/attn/v4_out/core.hpp"

namespace dsa::attn::v4_out {

using i64 = std::int64_t;

namespace {

// Half an ulp of bf16 at magnitude v >= 0 (the largest error of one RNE rounding of a value of magnitude <= v).
double halfulp_bf16(double v) {
  if (!(v >= 0x1p-126)) return 0x1p-134;
  return std::ldexp(1.0, std::ilogb(v) - 8);
}

// The dumped tensor `n` (outputs/, else expected/), else null.
const Tensor* dumped(const Case& c, const std::string& n) {
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(n); it != g->end()) return &it->second;
  return nullptr;
}

// Flat index into [T, N, D] of group g's k-th input element for token t (contiguous head blocks, or strided under
// Bug::heads_strided).
i64 group_elem(const Params& p, i64 t, i64 g, i64 k, Bug bug) {
  const i64 hpg = p.N / p.G;
  const i64 h = bug == Bug::heads_strided ? (k / p.D) * p.G + g : g * hpg + k / p.D;
  return (t * p.N + h) * p.D + k % p.D;
}

}  // namespace

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const Tensor& o = c.input("o");
  const Tensor& cs = c.input("cos");
  const Tensor& sn = c.input("sin");
  const Tensor& wa = c.input("wo_a");
  const Tensor& wb = c.input("wo_b");
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim, rope = p.rope, nope = D - rope, Ka = N * D / G, Kb = G * R;
  Tensor rot(DType::bf16, {T, N, D}), rot_m(DType::f64, {T, N, D});
  Tensor ua(DType::bf16, {T, G, R}), ua_m(DType::f64, {T, G, R});
  Tensor y(DType::bf16, {T, dim}), y_m(DType::f64, {T, dim});
  const std::uint16_t* ob = o.data<std::uint16_t>();
  const float* cf = cs.data<float>();
  const float* sf = sn.data<float>();
  const std::uint16_t* wab = wa.data<std::uint16_t>();
  const std::uint16_t* wbb = wb.data<std::uint16_t>();
  // Any-order fp32 summation of K products, g(K, 2^-24), plus the reference's own f64 chain (K 2^-53, with margin).
  auto gam = [](i64 K) {
    const double k = static_cast<double>(K);
    return k * 0x1p-24 / (1 - k * 0x1p-24) + k * 0x1p-53 * 1.01;
  };
  const double gKa = gam(Ka), gKb = gam(Kb);
  auto put = [&](Tensor& v, Tensor& m, i64 f, double val, double err) {
    v.data<std::uint16_t>()[f] = num::f64_to_bf16(val);
    m.data<double>()[f] = std::isfinite(val) ? halfulp_bf16(std::fabs(val) + err) + err : 0.0;
  };
#pragma omp parallel num_threads(threads > 0 ? threads : omp_get_max_threads())
  {
    std::vector<double> a(static_cast<std::size_t>(N * D)), am(static_cast<std::size_t>(N * D));
    std::vector<double> u(static_cast<std::size_t>(Kb)), um(static_cast<std::size_t>(Kb));
#pragma omp for schedule(dynamic, 1)
    for (i64 t = 0; t < T; ++t) {
      // Inverse RoPE of the last `rope` dims (or the first ones under a Bug) with this row's table.
      const i64 tt = bug == Bug::prev_row_table && t > 0 ? t - 1 : t;
      const i64 r0 = bug == Bug::rope_first_dims ? 0 : nope;
      const double sgn = bug == Bug::forward_rope ? -1.0 : 1.0;
      for (i64 h = 0; h < N; ++h) {
        const std::uint16_t* x = ob + (t * N + h) * D;
        const i64 f0 = (t * N + h) * D;
        for (i64 d = 0; d < D; ++d) {
          const double xd = num::bf16_to_f64(x[d]);
          if (d < r0 || d >= r0 + rope || bug == Bug::no_inverse_rope) {
            put(rot, rot_m, f0 + d, xd, 0.0);
            rot_m.data<double>()[f0 + d] = 0.0;  // a copy: bytes-exact
            continue;
          }
          const i64 i = d - r0;
          // partner dim and sign: interleaved pairs (2j, 2j+1), or NeoX halves under a Bug
          const i64 half = rope / 2;
          const i64 j = bug == Bug::neox_pairs ? (i < half ? i + half : i - half) : (i % 2 == 0 ? i + 1 : i - 1);
          const bool first = bug == Bug::neox_pairs ? i < half : i % 2 == 0;
          const double xp = num::bf16_to_f64(x[r0 + j]);
          const double cv = cf[tt * rope + i], sv = sgn * sf[tt * rope + i];
          const double p1 = xd * cv, p2 = xp * sv;  // exact: 8 x 24 significant bits
          const double v = first ? p1 + p2 : p1 - p2;
          put(rot, rot_m, f0 + d, v, (0x1p-22 + 0x1p-52) * (std::fabs(p1) + std::fabs(p2)));
        }
      }
      // Group GEMM on the reference's o_rot, its bound carried.
      for (i64 f = 0; f < N * D; ++f) {
        const i64 ff = t * N * D + f;
        a[static_cast<std::size_t>(f)] = num::bf16_to_f64(rot.data<std::uint16_t>()[ff]);
        am[static_cast<std::size_t>(f)] = rot_m.data<double>()[ff];
      }
      for (i64 g = 0; g < G; ++g) {
        const i64 gw = bug == Bug::groups_permuted ? (g + 1) % G : g;
        for (i64 r = 0; r < R; ++r) {
          const std::uint16_t* w = wab + (gw * R + r) * Ka;
          double s = 0, sa = 0, sp = 0;
          for (i64 k = 0; k < Ka; ++k) {
            const i64 e = group_elem(p, 0, g, k, bug);
            const double wk = num::bf16_to_f64(w[k]), ak = a[static_cast<std::size_t>(e)];
            s = std::fma(ak, wk, s);
            sa += std::fabs(ak * wk);
            sp += std::fabs(wk) * am[static_cast<std::size_t>(e)];
          }
          put(ua, ua_m, (t * G + g) * R + r, s, gKa * sa + sp * (1 + 0x1p-40));
        }
      }
      // wo_b on the reference's o_lora, its bound carried.
      for (i64 j = 0; j < Kb; ++j) {
        const i64 ff = t * Kb + j;
        u[static_cast<std::size_t>(j)] = num::bf16_to_f64(ua.data<std::uint16_t>()[ff]);
        um[static_cast<std::size_t>(j)] = ua_m.data<double>()[ff];
      }
      for (i64 d = 0; d < dim; ++d) {
        const std::uint16_t* w = wbb + d * Kb;
        double s = 0, sa = 0, sp = 0;
        for (i64 j = 0; j < Kb; ++j) {
          const double wj = num::bf16_to_f64(w[j]), uj = u[static_cast<std::size_t>(j)];
          s = std::fma(uj, wj, s);
          sa += std::fabs(uj * wj);
          sp += std::fabs(wj) * um[static_cast<std::size_t>(j)];
        }
        put(y, y_m, t * dim + d, s, gKb * sa + sp * (1 + 0x1p-40));
      }
    }
  }
  Expected ex;
  RefTensor r1 = bounded_ref("o_rot", rot, rot_m);
  r1.describe = [N, D](i64 f) { return "token " + std::to_string(f / (N * D)) + " head " + std::to_string(f / D % N) + " dim " + std::to_string(f % D); };
  if (const Tensor* d = dumped(c, "o_lora"); d && d->rank() == 2) {  // the dump's [T, G*R] view of the batch output
    ua = ua.reshape({T, G * R});
    ua_m = ua_m.reshape({T, G * R});
  }
  RefTensor r2 = bounded_ref("o_lora", ua, ua_m);
  r2.describe = [G, R](i64 f) { return "token " + std::to_string(f / (G * R)) + " group " + std::to_string(f / R % G) + " rank " + std::to_string(f % R); };
  RefTensor r3 = bounded_ref("output", y, y_m);
  r3.describe = [dim](i64 f) { return "token " + std::to_string(f / dim) + " dim " + std::to_string(f % dim); };
  ex.tensors = {std::move(r1), std::move(r2), std::move(r3)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::attn::v4_out
