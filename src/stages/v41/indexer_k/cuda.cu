// v41.indexer_k on the GPU: one thread per writing token runs core.hpp's key_values (the CPU's fp64 operations in the
// same order; --fmad=false): the values and bounds the host then quantizes with their candidates, as cpu.cpp does.
#include "backend/cuda.hpp"
#include "stages/v41/indexer_k/core.hpp"
#include "stages/v41/indexer_k/cuda.hpp"

namespace dsa::v41::indexer_k {
namespace {

__global__ void keys_kernel(CudaKeyJob j, double* y, double* ey) {
  const std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= j.E) return;
  core::key_values(j.k_pre + j.token[e] * core::kD, j.gamma, j.cos_sin + j.group[e] * core::kRope, j.eps, y + e * core::kD, ey + e * core::kD);
}

}  // namespace

void keys_cuda(const CudaKeyJob& job, double* y, double* ey) {
  if (job.E == 0) return;
  const auto n = static_cast<std::size_t>(job.E * core::kD * 8);
  cuda::Buffer dt(static_cast<std::size_t>(job.E * 8)), dg(static_cast<std::size_t>(job.E * 8)),
      dk(static_cast<std::size_t>(job.T * core::kD * 2)), dw(static_cast<std::size_t>(core::kD * 2)),
      dc(static_cast<std::size_t>(job.rows * core::kRope * 4)), dy(n), dey(n);
  dt.upload(job.token, static_cast<std::size_t>(job.E * 8));
  dg.upload(job.group, static_cast<std::size_t>(job.E * 8));
  dk.upload(job.k_pre, static_cast<std::size_t>(job.T * core::kD * 2));
  dw.upload(job.gamma, static_cast<std::size_t>(core::kD * 2));
  dc.upload(job.cos_sin, static_cast<std::size_t>(job.rows * core::kRope * 4));
  CudaKeyJob d = job;
  d.token = static_cast<const std::int64_t*>(dt.get()), d.group = static_cast<const std::int64_t*>(dg.get());
  d.k_pre = static_cast<const std::uint16_t*>(dk.get()), d.gamma = static_cast<const std::uint16_t*>(dw.get());
  d.cos_sin = static_cast<const float*>(dc.get());
  keys_kernel<<<static_cast<unsigned>((job.E + 63) / 64), 64>>>(d, static_cast<double*>(dy.get()), static_cast<double*>(dey.get()));
  cuda::check_last("v41.indexer_k keys kernel");
  dy.download(y, n);
  dey.download(ey, n);
}

}  // namespace dsa::v41::indexer_k
