// v4.compressor on the GPU: the projections (cuda.hpp); the pooling, norm, RoPE, rounding and bounds stay the
// host code of cpu.cpp, fed by these exact chains. Built with --fmad=false.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/chain_tile.cuh"
#include "backend/cuda.hpp"
#include "numerics/half_core.hpp"
#include "stages/v4/compressor/cuda.hpp"

namespace dsa::v4::compressor {

namespace {

using i64 = std::int64_t;

__device__ inline double bf16d(std::uint16_t b) { return halfcore::bf16_to_f64(b); }

// out[t][o] = chain over h of x[t][h] w[o][h]: 32 tokens x 64 output channels per block.
__global__ void __launch_bounds__(cuda::kChainThreads) project_kernel(const std::uint16_t* x, i64 nt, i64 H, const std::uint16_t* w,
                                                                      i64 C2, double* out) {
  const i64 t0 = static_cast<i64>(blockIdx.y) * cuda::kChainTI, o0 = static_cast<i64>(blockIdx.x) * cuda::kChainTJ;
  double acc[4][4];
  cuda::chain_tile(
      nt - t0, C2 - o0, H, [&](int i, i64 h) { return bf16d(x[(t0 + i) * H + h]); },
      [&](int j, i64 h) { return bf16d(w[(o0 + j) * H + h]); }, acc);
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  for (int i = 0; i < 4; ++i) {
    const i64 t = t0 + ty + 8 * i;
    for (int j = 0; j < 4; ++j) {
      const i64 o = o0 + tx + 16 * j;
      if (t < nt && o < C2) out[t * C2 + o] = acc[i][j];
    }
  }
}

}  // namespace

void project_cuda(const std::uint16_t* x, std::int64_t T, std::int64_t H, const std::uint16_t* wkv, const std::uint16_t* wgate,
                  std::int64_t C2, const std::function<void(std::int64_t, std::int64_t, const double*, const double*)>& emit) {
  if (T <= 0) return;
  const std::size_t wbytes = static_cast<std::size_t>(C2 * H) * 2;
  cuda::Buffer dwk(wbytes), dwg(wbytes);
  dwk.upload(wkv, wbytes);
  dwg.upload(wgate, wbytes);
  // Token chunks of at most 2^26 output doubles per projection (512 MiB) and 65535 * 32 tokens (grid y).
  const i64 chunk = std::max<i64>(1, std::min<i64>((i64{1} << 26) / std::max<i64>(C2, 1), i64{65535} * cuda::kChainTI));
  const i64 ct = std::min(chunk, T);
  cuda::Buffer dx(static_cast<std::size_t>(ct * H) * 2), dk(static_cast<std::size_t>(ct * C2) * 8), dg(static_cast<std::size_t>(ct * C2) * 8);
  std::vector<double> hk(static_cast<std::size_t>(ct * C2)), hg(hk.size());
  for (i64 t0 = 0; t0 < T; t0 += ct) {
    const i64 nt = std::min(ct, T - t0);
    dx.upload(x + t0 * H, static_cast<std::size_t>(nt * H) * 2);
    const dim3 grid(static_cast<unsigned>((C2 + cuda::kChainTJ - 1) / cuda::kChainTJ), static_cast<unsigned>((nt + cuda::kChainTI - 1) / cuda::kChainTI));
    project_kernel<<<grid, cuda::kChainThreads>>>(static_cast<const std::uint16_t*>(dx.get()), nt, H, static_cast<const std::uint16_t*>(dwk.get()),
                                                  C2, static_cast<double*>(dk.get()));
    project_kernel<<<grid, cuda::kChainThreads>>>(static_cast<const std::uint16_t*>(dx.get()), nt, H, static_cast<const std::uint16_t*>(dwg.get()),
                                                  C2, static_cast<double*>(dg.get()));
    cuda::check_last("v4.compressor projections");
    dk.download(hk.data(), static_cast<std::size_t>(nt * C2) * 8);
    dg.download(hg.data(), static_cast<std::size_t>(nt * C2) * 8);
    emit(t0, nt, hk.data(), hg.data());
  }
}

}  // namespace dsa::v4::compressor
