// attn.v4_out reference: o_rot through core.hpp's rot_elem; o_lora and output as blocked GEMMs (project below) that
// give each output core.hpp's lora_elem / out_elem bits (cuda.cu runs those element functions on the device:
// cuda.cpp); the host parts both backends share (the output tensors, the bounds' summation factors, the packaging).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "engines/sparse_attn/head_out.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"
#include "stages/attn/v4_out/stage.hpp"

namespace dsa::attn::v4_out {

using i64 = std::int64_t;

namespace {

// The dumped tensor `n` (outputs/, else expected/), else null.
const Tensor* dumped(const Case& c, const std::string& n) {
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(n); it != g->end()) return &it->second;
  return nullptr;
}

}  // namespace

Outputs make_outputs(const Params& p) {
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim;
  Outputs o;
  o.rot = Tensor(DType::bf16, {T, N, D}), o.rot_m = Tensor(DType::f64, {T, N, D});
  o.ua = Tensor(DType::bf16, {T, G, R}), o.ua_m = Tensor(DType::f64, {T, G, R});
  o.y = Tensor(DType::bf16, {T, dim}), o.y_m = Tensor(DType::f64, {T, dim});
  return o;
}

double gamma_sum(i64 K) {
  const double k = static_cast<double>(K);
  return k * 0x1p-24 / (1 - k * 0x1p-24) + k * 0x1p-53 * 1.01;
}

namespace {

constexpr i64 kTB = 64, kOC = 64;  // tokens per block (a multiple of 4), outputs per work item (a multiple of 8)

// One GEMM of the output path: for tokens t < T and outputs o < O, the three chains of core.hpp's lora_elem /
// out_elem over k < K — value sum_k a w, magnitude sum_k |a| |w|, carried bound sum_k |w| a_m — as three
// attn::gemm_qk (each element's fma chain in k order from +0: the same bits on every ISA path), then put(). The
// activation row of token t is read through act(t, k) (a flat index into act / act_m: the group's gather), the weight
// row of output o through wrow(o) (K bf16 bits). Tokens in blocks of kTB (their rows decoded once per block), outputs
// in items of kOC (their rows packed in 8-key panels per item), items over the threads.
template <class Act, class WRow, class Out>
void project(i64 T, i64 O, i64 K, Act act, const std::uint16_t* a, const double* a_m, WRow wrow, double gK, Out out, std::uint16_t* v,
             double* m, int threads) {
  const i64 items = (O + kOC - 1) / kOC;
  std::vector<double> Q(static_cast<std::size_t>(kTB * K)), Qa(Q.size()), Qm(Q.size());
  for (i64 t0 = 0; t0 < T; t0 += kTB) {
    const i64 tb = std::min(kTB, T - t0), hp = (tb + 3) / 4 * 4;
    for (i64 i = 0; i < hp; ++i)
      for (i64 k = 0; k < K; ++k) {
        const std::size_t q = static_cast<std::size_t>(i * K + k);
        if (i >= tb) {
          Q[q] = Qa[q] = Qm[q] = 0.0;
          continue;
        }
        const i64 e = act(t0 + i, k);
        Q[q] = halfcore::bf16_to_f64(a[e]);
        Qa[q] = hd::abs(Q[q]);
        Qm[q] = a_m[e];
      }
#pragma omp parallel num_threads(threads)
    {
      std::vector<double> Kp(static_cast<std::size_t>(kOC * K)), Ka(Kp.size()), S(static_cast<std::size_t>(hp * kOC)), Sa(S.size()),
          Sp(S.size());
#pragma omp for schedule(dynamic, 1)
      for (i64 it = 0; it < items; ++it) {
        const i64 o0 = it * kOC, oc = std::min(kOC, O - o0), np = (oc + 7) / 8 * 8;
        for (i64 x = 0; x < np; ++x) {  // panel x / 8, lane x % 8: Kp[((x / 8) K + k) 8 + x % 8]
          double* kp = Kp.data() + (x / 8) * K * 8 + x % 8;
          double* ka = Ka.data() + (x / 8) * K * 8 + x % 8;
          if (x >= oc) {
            for (i64 k = 0; k < K; ++k) kp[k * 8] = ka[k * 8] = 0.0;
            continue;
          }
          const std::uint16_t* w = wrow(o0 + x);
          for (i64 k = 0; k < K; ++k) {
            kp[k * 8] = halfcore::bf16_to_f64(w[k]);
            ka[k * 8] = hd::abs(kp[k * 8]);
          }
        }
        attn::gemm_qk(Q.data(), hp, Kp.data(), np, K, S.data());
        attn::gemm_qk(Qa.data(), hp, Ka.data(), np, K, Sa.data());
        attn::gemm_qk(Qm.data(), hp, Ka.data(), np, K, Sp.data());
        for (i64 i = 0; i < tb; ++i)
          for (i64 x = 0; x < oc; ++x) {
            const std::size_t q = static_cast<std::size_t>(i * np + x);
            put(v, m, out(t0 + i, o0 + x), S[q], gK * Sa[q] + Sp[q] * (1 + 0x1p-40));
          }
      }
    }
  }
}

}  // namespace

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const Tensor& o = c.input("o");
  const Tensor& cs = c.input("cos");
  const Tensor& sn = c.input("sin");
  const Tensor& wa = c.input("wo_a");
  const Tensor& wb = c.input("wo_b");
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim, Ka = N * D / G, Kb = G * R;
  const int nt = threads > 0 ? threads : omp_get_max_threads();
  Outputs out = make_outputs(p);
  const Dims dm = dims(p);
  const std::uint16_t* ob = o.data<std::uint16_t>();
  const float* cf = cs.data<float>();
  const float* sf = sn.data<float>();
  const std::uint16_t* wab = wa.data<std::uint16_t>();
  const std::uint16_t* wbb = wb.data<std::uint16_t>();
  std::uint16_t* rb = out.rot.data<std::uint16_t>();
  double* rm = out.rot_m.data<double>();
  std::uint16_t* ub = out.ua.data<std::uint16_t>();
  double* um = out.ua_m.data<double>();
  std::uint16_t* yb = out.y.data<std::uint16_t>();
  double* ym = out.y_m.data<double>();
  // Inverse RoPE, then the group GEMM on the reference's o_rot and wo_b on its o_lora, their bounds carried.
#pragma omp parallel for schedule(static) num_threads(nt)
  for (i64 t = 0; t < T; ++t)
    for (i64 h = 0; h < N; ++h)
      for (i64 d = 0; d < D; ++d) rot_elem(dm, ob, cf, sf, t, h, d, bug, rb, rm);
  for (i64 g = 0; g < G; ++g) {
    const i64 gw = bug == Bug::groups_permuted ? (g + 1) % G : g;
    project(
        T, R, Ka, [&](i64 t, i64 k) { return group_elem(dm, t, g, k, bug); }, rb, rm, [&](i64 r) { return wab + (gw * R + r) * Ka; },
        gamma_sum(Ka), [&](i64 t, i64 r) { return (t * G + g) * R + r; }, ub, um, nt);
  }
  project(
      T, dim, Kb, [&](i64 t, i64 j) { return t * Kb + j; }, ub, um, [&](i64 d) { return wbb + d * Kb; }, gamma_sum(Kb),
      [&](i64 t, i64 d) { return t * dim + d; }, yb, ym, nt);
  return package(c, p, std::move(out));
}

Expected package(const Case& c, const Params& p, Outputs o) {
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim;
  Expected ex;
  RefTensor r1 = bounded_ref("o_rot", o.rot, o.rot_m);
  r1.describe = [N, D](i64 f) { return "token " + std::to_string(f / (N * D)) + " head " + std::to_string(f / D % N) + " dim " + std::to_string(f % D); };
  if (const Tensor* d = dumped(c, "o_lora"); d && d->rank() == 2) {  // the dump's [T, G*R] view of the batch output
    o.ua = o.ua.reshape({T, G * R});
    o.ua_m = o.ua_m.reshape({T, G * R});
  }
  RefTensor r2 = bounded_ref("o_lora", o.ua, o.ua_m);
  r2.describe = [G, R](i64 f) { return "token " + std::to_string(f / (G * R)) + " group " + std::to_string(f / R % G) + " rank " + std::to_string(f % R); };
  RefTensor r3 = bounded_ref("output", o.y, o.y_m);
  r3.describe = [dim](i64 f) { return "token " + std::to_string(f / dim) + " dim " + std::to_string(f % dim); };
  ex.tensors = {std::move(r1), std::move(r2), std::move(r3)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::attn::v4_out
