// attn.v4_out reference: tokens in parallel; exact products, fixed-order f64 sums, one bf16 rounding per output, each
// output through core.hpp's DSA_HD functions (cuda.cu runs the same functions on the device: cuda.cpp); the host
// parts both backends share (the output tensors, the bounds' summation factors, the packaging).
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "engines/sparse_attn/head_out.hpp"
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

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const Tensor& o = c.input("o");
  const Tensor& cs = c.input("cos");
  const Tensor& sn = c.input("sin");
  const Tensor& wa = c.input("wo_a");
  const Tensor& wb = c.input("wo_b");
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim, Ka = N * D / G, Kb = G * R;
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
  const double gKa = gamma_sum(Ka), gKb = gamma_sum(Kb);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : omp_get_max_threads())
  for (i64 t = 0; t < T; ++t) {
    // Inverse RoPE, then the group GEMM on the reference's o_rot and wo_b on its o_lora, their bounds carried.
    for (i64 h = 0; h < N; ++h)
      for (i64 d = 0; d < D; ++d) rot_elem(dm, ob, cf, sf, t, h, d, bug, rb, rm);
    for (i64 g = 0; g < G; ++g)
      for (i64 r = 0; r < R; ++r) lora_elem(dm, rb, rm, wab, gKa, t, g, r, bug, ub, um);
    for (i64 d = 0; d < dim; ++d) out_elem(dm, ub, um, wbb, gKb, t, d, yb, ym);
  }
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
