// One block's tile of fp64 "chain" products on the GPU: C[i][j] = fma(A[i][K-1], B[j][K-1], ... fma(A[i][0], B[j][0], 0))
// -- each element an fma chain over k in increasing order, the order the CPU micro-kernels keep per element
// (attn::gemm_qk, attn::row_qk, attn::row_pv), so both give the same bits in any tiling. 128 threads own a 32 (i) x 64 (j) tile,
// 4 x 4 elements each; k runs in shared-memory slices of 32. The loaders give A(i, k) and B(j, k) as doubles for
// i < ni, j < nj, k < K (only those are requested). Device code only (include from .cu files).
#pragma once
#include <cstdint>

namespace dsa::cuda {

constexpr int kChainTI = 32, kChainTJ = 64, kChainTK = 32, kChainThreads = 128;

// acc[a][b] is element (i0 + ty + 8a, j0 + tx + 16b) with tx = threadIdx.x & 15, ty = threadIdx.x >> 4.
template <class LoadA, class LoadB>
__device__ inline void chain_tile(std::int64_t ni, std::int64_t nj, std::int64_t K, LoadA load_a, LoadB load_b, double (&acc)[4][4]) {
  __shared__ double As[kChainTI][kChainTK + 1];
  __shared__ double Bs[kChainTJ][kChainTK + 1];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) acc[a][b] = 0.0;
  for (std::int64_t k0 = 0; k0 < K; k0 += kChainTK) {
    const int kmax = static_cast<int>(K - k0 < kChainTK ? K - k0 : kChainTK);
    for (int x = tid; x < kChainTI * kChainTK; x += kChainThreads) {
      const int ii = x / kChainTK, kk = x % kChainTK;
      As[ii][kk] = ii < ni && kk < kmax ? load_a(ii, k0 + kk) : 0.0;
    }
    for (int x = tid; x < kChainTJ * kChainTK; x += kChainThreads) {
      const int jj = x / kChainTK, kk = x % kChainTK;
      Bs[jj][kk] = jj < nj && kk < kmax ? load_b(jj, k0 + kk) : 0.0;
    }
    __syncthreads();
    for (int kk = 0; kk < kmax; ++kk) {
      double av[4], bv[4];
      for (int a = 0; a < 4; ++a) av[a] = As[ty + 8 * a][kk];
      for (int b = 0; b < 4; ++b) bv[b] = Bs[tx + 16 * b][kk];
      for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b) acc[a][b] = fma(av[a], bv[b], acc[a][b]);
    }
    __syncthreads();
  }
}

}  // namespace dsa::cuda
