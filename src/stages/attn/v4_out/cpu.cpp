// attn.v4_out reference: tokens in parallel; exact products, fixed-order f64 sums, one bf16 rounding per output, each
// output through elem_core.hpp's DSA_HD functions; with Backend::cuda the same functions run on the device (cuda.cu).
#include <omp.h>

#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "engines/sparse_attn/head_out.hpp"
#include "stages/attn/v4_out/core.hpp"
#include "stages/attn/v4_out/cuda_api.hpp"

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

Expected run(const Case& c, const Params& p, Bug bug, int threads) { return run_on(c, p, bug, threads, Backend::cpu); }

Expected run_on(const Case& c, const Params& p, Bug bug, int threads, Backend backend) {
  const Tensor& o = c.input("o");
  const Tensor& cs = c.input("cos");
  const Tensor& sn = c.input("sin");
  const Tensor& wa = c.input("wo_a");
  const Tensor& wb = c.input("wo_b");
  const i64 T = p.T, N = p.N, D = p.D, G = p.G, R = p.R, dim = p.dim, Ka = N * D / G, Kb = G * R;
  Tensor rot(DType::bf16, {T, N, D}), rot_m(DType::f64, {T, N, D});
  Tensor ua(DType::bf16, {T, G, R}), ua_m(DType::f64, {T, G, R});
  Tensor y(DType::bf16, {T, dim}), y_m(DType::f64, {T, dim});
  const Dims dm = dims(p);
  const std::uint16_t* ob = o.data<std::uint16_t>();
  const float* cf = cs.data<float>();
  const float* sf = sn.data<float>();
  const std::uint16_t* wab = wa.data<std::uint16_t>();
  const std::uint16_t* wbb = wb.data<std::uint16_t>();
  std::uint16_t* rb = rot.data<std::uint16_t>();
  double* rm = rot_m.data<double>();
  std::uint16_t* ub = ua.data<std::uint16_t>();
  double* um = ua_m.data<double>();
  std::uint16_t* yb = y.data<std::uint16_t>();
  double* ym = y_m.data<double>();
  // Any-order fp32 summation of K products, g(K, 2^-24), plus the reference's own f64 chain (K 2^-53, with margin).
  auto gam = [](i64 K) {
    const double k = static_cast<double>(K);
    return k * 0x1p-24 / (1 - k * 0x1p-24) + k * 0x1p-53 * 1.01;
  };
  const double gKa = gam(Ka), gKb = gam(Kb);
#ifdef DSA_CUDA_BACKEND
  if (backend == Backend::cuda && bug == Bug::none) {
    v4_out_cuda(dm, ob, cf, sf, wab, wbb, gKa, gKb, rb, rm, ub, um, yb, ym);
  } else
#else
  (void)backend;
#endif
  {
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads > 0 ? threads : omp_get_max_threads())
    for (i64 t = 0; t < T; ++t) {
      // Inverse RoPE, then the group GEMM on the reference's o_rot and wo_b on its o_lora, their bounds carried.
      for (i64 h = 0; h < N; ++h)
        for (i64 d = 0; d < D; ++d) rot_elem(dm, ob, cf, sf, t, h, d, bug, rb, rm);
      for (i64 g = 0; g < G; ++g)
        for (i64 r = 0; r < R; ++r) lora_elem(dm, rb, rm, wab, gKa, t, g, r, bug, ub, um);
      for (i64 d = 0; d < dim; ++d) out_elem(dm, ub, um, wbb, gKb, t, d, yb, ym);
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
