// indexer.npu_lightning's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error
// on a CUDA failure; and the kernel's per-thread body (DSA_HD), which the host runs too (scores_host: the ctest
// "CUDA kernel body on the host" checks its index math and operations against cpu.cpp without a GPU).
#pragma once
#include <cstdint>

#include "stages/indexer/npu_lightning/score_core.hpp"

namespace dsa::indexer::npu_lightning {

// Everything the score kernel reads (host pointers for scores_cuda / scores_host; cuda.cu passes a copy with device
// pointers to the kernel): the rows, weights (widened exactly, engines::ascend_li::widen) and cache geometry of PagedRows, and
// the members below.
struct CudaJob : engines::ascend_li::core::PagedRows {
  const void* query = nullptr;  // [T, H, D] bf16 / fp16 bits (elem)
  const void* key = nullptr;    // [key_slots, D] (the PA_BSND cache flattened), the query's dtype
  engines::ascend_li::core::Elem elem = engines::ascend_li::core::Elem::bf16;
  core::Consts k;
};

// Row t, position j < C: the score and bound of cpu.cpp's scorer (key j at engines::ascend_li::key_slot, per head h = 0..H-1
// the dot64 of the exactly decoded codes then core::head, core::finish), or -inf / 0 (score_buffers) for j >= nvis.
DSA_HD inline void score_thread(const CudaJob& d, engines::ascend_li::core::Elem e, std::int64_t t, std::int64_t j, double& score,
                                double& bound) {
  namespace lc = engines::ascend_li::core;
  using i64 = std::int64_t;
  if (j >= d.row_nvis[t]) {
    score = lc::neg_inf();
    bound = 0.0;
    return;
  }
  const i64 slot = d.slot(t, j);
  const i64 q0 = t * d.H * d.D, k0 = slot * d.D;
  const void* q = d.query;
  const void* key = d.key;
  core::Acc acc;
  for (i64 h = 0; h < d.H; ++h) {
    const i64 qh = q0 + h * d.D;
    double s, a;
    lc::dot64([=](i64 x) { return lc::widen(q, e, qh + x); }, [=](i64 x) { return lc::widen(key, e, k0 + x); }, d.D, s, a);
    core::head(acc, s, a, d.weights[t * d.H + h], d.k);
  }
  core::finish(acc, d.k, score, bound);
}

// scores, bounds [T, C] (host memory): score_thread for every (t, j < C), on the GPU (cuda.cu) or on the host.
void scores_cuda(const CudaJob& job, double* scores, double* bounds);
void scores_host(const CudaJob& job, double* scores, double* bounds);

}  // namespace dsa::indexer::npu_lightning
