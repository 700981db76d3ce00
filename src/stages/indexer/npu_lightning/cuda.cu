// indexer.npu_lightning on the GPU: one thread per (row, key position j < C) running score_thread (core.hpp: the
// key's slot from the block table, the exactly decoded codes, per head h = 0..H-1 in turn core::dot64 and core::head,
// then core::finish): the body cpu.cpp runs on the host (--fmad=false), so the same bits. Rows go in chunks so that
// the device holds at most ~256 MiB of scores and bounds besides the inputs.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backend/cuda.hpp"
#include "engines/ascend_li/score_chunks.cuh"
#include "stages/indexer/npu_lightning/cuda.hpp"

namespace dsa::indexer::npu_lightning {

namespace {

using i64 = std::int64_t;
namespace lc = engines::ascend_li::core;

template <int E>
__global__ void score_kernel(core::ScoreJob d, i64 row0, i64 rows, double* sc, double* bd) {
  const i64 r = blockIdx.y;
  const i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows || j >= d.C) return;
  core::score_thread(d, static_cast<lc::Elem>(E), row0 + r, j, sc[r * d.C + j], bd[r * d.C + j]);
}

}  // namespace

void scores_cuda(const core::ScoreJob& job, double* scores, double* bounds) {
  const i64 T = job.T, C = job.C;
  if (T <= 0) return;
  if (job.elem != lc::Elem::fp16 && job.elem != lc::Elem::bf16)
    throw std::runtime_error("indexer.npu_lightning on CUDA: query / key must be bf16 or fp16");
  const std::size_t qbytes = static_cast<std::size_t>(T * job.H * job.D) * 2, kbytes = static_cast<std::size_t>(job.key_slots * job.D) * 2;
  cuda::Buffer dq(qbytes), dk(kbytes);
  if (qbytes) dq.upload(job.query, qbytes);
  if (kbytes) dk.upload(job.key, kbytes);
  const engines::ascend_li::DevicePagedRows rows(job);
  core::ScoreJob d = job;  // the same job with device pointers
  rows.bind(d);
  d.query = dq.get();
  d.key = dk.get();
  engines::ascend_li::score_rows_chunked(T, C, scores, bounds, "indexer.npu_lightning score kernel", [&](dim3 grid, i64 row0, i64 rows, double* sc, double* bd) {
    if (job.elem == lc::Elem::fp16) score_kernel<static_cast<int>(lc::Elem::fp16)><<<grid, engines::ascend_li::kScoreThreads>>>(d, row0, rows, sc, bd);
    else score_kernel<static_cast<int>(lc::Elem::bf16)><<<grid, engines::ascend_li::kScoreThreads>>>(d, row0, rows, sc, bd);
  });
}

}  // namespace dsa::indexer::npu_lightning
