// v4.indexer on the GPU, every variant: one thread per (row, entry position j < C) running score_thread (core.hpp:
// the entry's slot from the block table; per head h = 0..H-1 in turn the exact int8 dot (__dp4a when D % 4 == 0) and
// core::a3_head, or the float variants' core::dot64 over the exactly decoded codes and core::fl_head; then the
// finish with the key scale): the body cpu.cpp runs on the host (--fmad=false), so the same bits. Rows go in
// chunks so that the device holds at most ~256 MiB of scores and bounds besides the inputs.
#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "backend/cuda.hpp"
#include "engines/ascend_li/score_chunks.cuh"
#include "stages/v4/indexer/cuda.hpp"

namespace dsa::v4::indexer {

namespace {

using i64 = std::int64_t;
namespace lc = dsa::engines::ascend_li::core;

template <core::Variant V>
__global__ void score_kernel(core::ScoreJob d, i64 row0, i64 rows, double* sc, double* bd) {
  const i64 r = blockIdx.y;
  const i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows || j >= d.C) return;
  d.variant = V;  // a compile-time constant for the branches of score_thread
  core::score_thread(d, core::fl_elem(V), row0 + r, j, sc[r * d.C + j], bd[r * d.C + j]);
}

}  // namespace

void scores_cuda(const core::ScoreJob& job, double* scores, double* bounds) {
  const i64 T = job.T, C = job.C;
  if (T <= 0) return;
  // element sizes: codes 1 byte (int8, e4m3) or 2 (bf16); key scales fp16 (a3) or f32 (vllm), none for ref-bf16
  using V = core::Variant;
  const std::size_t es = job.variant == V::ref_bf16 ? 2 : 1, ss = job.variant == V::ascend_a3 ? 2 : job.variant == V::vllm_cuda ? 4 : 0;
  const std::size_t qbytes = static_cast<std::size_t>(T * job.H * job.D) * es, kbytes = static_cast<std::size_t>(job.key_slots * job.D) * es;
  const std::size_t sbytes = static_cast<std::size_t>(job.key_slots) * ss;
  if (ss && !job.key_scale) throw std::runtime_error("v4.indexer on CUDA: key_dequant_scale missing");
  cuda::Buffer dq(qbytes), dk(kbytes), dks(sbytes);
  if (qbytes) dq.upload(job.query, qbytes);
  if (kbytes) dk.upload(job.key, kbytes);
  if (sbytes) dks.upload(job.key_scale, sbytes);
  const dsa::engines::ascend_li::DevicePagedRows rows(job);
  core::ScoreJob d = job;  // the same job with device pointers
  rows.bind(d);
  d.query = dq.get();
  d.key = dk.get();
  d.key_scale = dks.get();
  dsa::engines::ascend_li::score_rows_chunked(T, C, scores, bounds, "v4.indexer score kernel", [&](dim3 grid, i64 row0, i64 rows, double* sc, double* bd) {
    constexpr int tpb = dsa::engines::ascend_li::kScoreThreads;
    if (job.variant == V::ascend_a3) score_kernel<V::ascend_a3><<<grid, tpb>>>(d, row0, rows, sc, bd);
    else if (job.variant == V::vllm_cuda) score_kernel<V::vllm_cuda><<<grid, tpb>>>(d, row0, rows, sc, bd);
    else score_kernel<V::ref_bf16><<<grid, tpb>>>(d, row0, rows, sc, bd);
  });
}

}  // namespace dsa::v4::indexer
