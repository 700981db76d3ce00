// v41.logits on the GPU: one thread per output element runs core.hpp's logit (the CPU's fp64 operations in the same
// order; --fmad=false): identical bytes to cpu.cpp.
#include <vector>

#include "backend/cuda.hpp"
#include "stages/v41/logits/cuda.hpp"

namespace dsa::v41::logits {
namespace {

__global__ void logits_kernel(CudaLogitsJob j, core::Logit* out) {
  const std::int64_t f = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (f >= j.R * j.cols) return;
  const std::int64_t off = j.off[f];
  if (off < 0) return;
  const std::int64_t r = f / j.cols;
  out[f] = core::logit(j.q + r * j.H * (j.D / 2), j.qsf + r * j.H, j.w + r * j.H, j.keys + off, j.ksf[f], j.H, j.D, false, false);
}

}  // namespace

void logits_cuda(const CudaLogitsJob& job, core::Logit* out) {
  const std::int64_t n = job.R * job.cols;
  if (n == 0) return;
  cuda::Buffer dq(static_cast<std::size_t>(job.R * job.H * (job.D / 2))), dqs(static_cast<std::size_t>(job.R * job.H * 4)),
      dw(static_cast<std::size_t>(job.R * job.H * 8)), dk(static_cast<std::size_t>(job.key_bytes > 0 ? job.key_bytes : 1)),
      doff(static_cast<std::size_t>(n * 8)), dks(static_cast<std::size_t>(n * 4)), dout(static_cast<std::size_t>(n) * sizeof(core::Logit));
  dq.upload(job.q, static_cast<std::size_t>(job.R * job.H * (job.D / 2)));
  dqs.upload(job.qsf, static_cast<std::size_t>(job.R * job.H * 4));
  dw.upload(job.w, static_cast<std::size_t>(job.R * job.H * 8));
  if (job.key_bytes > 0) dk.upload(job.keys, static_cast<std::size_t>(job.key_bytes));
  doff.upload(job.off, static_cast<std::size_t>(n * 8));
  dks.upload(job.ksf, static_cast<std::size_t>(n * 4));
  dout.upload(out, static_cast<std::size_t>(n) * sizeof(core::Logit));
  CudaLogitsJob d = job;
  d.q = static_cast<const std::uint8_t*>(dq.get());
  d.qsf = static_cast<const std::uint32_t*>(dqs.get());
  d.w = static_cast<const double*>(dw.get());
  d.keys = static_cast<const std::uint8_t*>(dk.get());
  d.off = static_cast<const std::int64_t*>(doff.get());
  d.ksf = static_cast<const std::uint32_t*>(dks.get());
  logits_kernel<<<static_cast<unsigned>((n + 127) / 128), 128>>>(d, static_cast<core::Logit*>(dout.get()));
  cuda::check_last("v41.logits kernel");
  dout.download(out, static_cast<std::size_t>(n) * sizeof(core::Logit));
}

}  // namespace dsa::v41::logits
