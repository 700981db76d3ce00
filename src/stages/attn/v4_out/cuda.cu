// attn.v4_out on the GPU: three kernels, one thread per output element each, running core.hpp's rot_elem,
// lora_elem and out_elem — the definitions cpu.cpp runs (built with --fmad=false; fma and the f64 sums in the same
// index order): identical bits (dsa-check backend-diff). Each stage reads the previous one's device output, as the
// CPU reads the reference's own o_rot / o_lora. Device memory: the inputs, the outputs and their bounds.
#include <cstdint>

#include "backend/cuda.hpp"
#include "stages/attn/v4_out/cuda.hpp"

namespace dsa::attn::v4_out {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = 128;

unsigned blocks_for(i64 n) {  // grid-stride loops below: at most 65535 blocks
  const i64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

__global__ void rot_kernel(Dims p, const std::uint16_t* o, const float* cf, const float* sf, std::uint16_t* rot, double* rot_m) {
  const i64 n = p.T * p.N * p.D, stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; id < n; id += stride) {
    const i64 t = id / (p.N * p.D), h = id / p.D % p.N, d = id % p.D;
    rot_elem(p, o, cf, sf, t, h, d, Bug::none, rot, rot_m);
  }
}

__global__ void lora_kernel(Dims p, const std::uint16_t* rot, const double* rot_m, const std::uint16_t* wa, double gKa, std::uint16_t* ua,
                            double* ua_m) {
  const i64 n = p.T * p.G * p.R, stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; id < n; id += stride) {
    const i64 t = id / (p.G * p.R), g = id / p.R % p.G, r = id % p.R;
    lora_elem(p, rot, rot_m, wa, gKa, t, g, r, Bug::none, ua, ua_m);
  }
}

__global__ void out_kernel(Dims p, const std::uint16_t* ua, const double* ua_m, const std::uint16_t* wb, double gKb, std::uint16_t* y,
                           double* y_m) {
  const i64 n = p.T * p.dim, stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; id < n; id += stride) {
    const i64 t = id / p.dim, d = id % p.dim;
    out_elem(p, ua, ua_m, wb, gKb, t, d, y, y_m);
  }
}

template <class P>
P* dev(const cuda::Buffer& b) {
  return static_cast<P*>(b.get());
}

}  // namespace

void v4_out_cuda(const Dims& p, const std::uint16_t* o, const float* cos_rows, const float* sin_rows, const std::uint16_t* wo_a,
                 const std::uint16_t* wo_b, double gKa, double gKb, std::uint16_t* rot, double* rot_m, std::uint16_t* lora,
                 double* lora_m, std::uint16_t* out, double* out_m) {
  const i64 Ka = p.N * p.D / p.G, Kb = p.G * p.R;
  const auto n_o = static_cast<std::size_t>(p.T * p.N * p.D), n_cs = static_cast<std::size_t>(p.T * p.rope),
             n_wa = static_cast<std::size_t>(Kb * Ka), n_wb = static_cast<std::size_t>(p.dim * Kb), n_u = static_cast<std::size_t>(p.T * Kb),
             n_y = static_cast<std::size_t>(p.T * p.dim);
  cuda::Buffer d_o(n_o * 2), d_cs(n_cs * 4), d_sn(n_cs * 4), d_wa(n_wa * 2), d_wb(n_wb * 2);
  d_o.upload(o, n_o * 2);
  d_cs.upload(cos_rows, n_cs * 4);
  d_sn.upload(sin_rows, n_cs * 4);
  d_wa.upload(wo_a, n_wa * 2);
  d_wb.upload(wo_b, n_wb * 2);
  cuda::Buffer d_rot(n_o * 2), d_rot_m(n_o * 8), d_u(n_u * 2), d_u_m(n_u * 8), d_y(n_y * 2), d_y_m(n_y * 8);
  if (n_o > 0) {
    rot_kernel<<<blocks_for(static_cast<i64>(n_o)), kThreads>>>(p, dev<const std::uint16_t>(d_o), dev<const float>(d_cs),
                                                                dev<const float>(d_sn), dev<std::uint16_t>(d_rot), dev<double>(d_rot_m));
    cuda::check_last("attn.v4_out inverse rotation kernel");
  }
  if (n_u > 0) {
    lora_kernel<<<blocks_for(static_cast<i64>(n_u)), kThreads>>>(p, dev<const std::uint16_t>(d_rot), dev<const double>(d_rot_m),
                                                                 dev<const std::uint16_t>(d_wa), gKa, dev<std::uint16_t>(d_u),
                                                                 dev<double>(d_u_m));
    cuda::check_last("attn.v4_out wo_a kernel");
  }
  if (n_y > 0) {
    out_kernel<<<blocks_for(static_cast<i64>(n_y)), kThreads>>>(p, dev<const std::uint16_t>(d_u), dev<const double>(d_u_m),
                                                                dev<const std::uint16_t>(d_wb), gKb, dev<std::uint16_t>(d_y), dev<double>(d_y_m));
    cuda::check_last("attn.v4_out wo_b kernel");
  }
  d_rot.download(rot, n_o * 2);
  d_rot_m.download(rot_m, n_o * 8);
  d_u.download(lora, n_u * 2);
  d_u_m.download(lora_m, n_u * 8);
  d_y.download(out, n_y * 2);
  d_y_m.download(out_m, n_y * 8);
}

}  // namespace dsa::attn::v4_out
