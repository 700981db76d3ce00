// v4.indexer's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a CUDA
// failure; and the kernel's per-thread body (DSA_HD), which the host runs too (scores_host: the ctest "CUDA kernel
// body on the host" checks its index math and operations against cpu.cpp without a GPU). All three variants.
#pragma once
#include <cstdint>

#include "stages/v4/indexer/score_core.hpp"

namespace dsa::v4::indexer {

// Everything the score kernel reads (host pointers for scores_cuda / scores_host; cuda.cu passes a copy with device
// pointers to the kernel): the rows, weights (a3: wq = core::a3_wq(w16, qs16); else the weights widened exactly) and
// cache geometry of PagedRows, and the members below.
struct CudaJob : dsa::indexer::ascend_li::core::PagedRows {
  int variant = 0;                  // 0 ascend-a3, 1 vllm-cuda, 2 ref-bf16 (Variant)
  const void* query = nullptr;      // [T, H, D]: int8 (a3), e4m3 (vllm), bf16 (ref)
  const void* key = nullptr;        // [key_slots, D] (the PA_BSND cache flattened), the query's kind
  const void* key_scale = nullptr;  // [key_slots]: fp16 bits (a3), f32 (vllm), unused (ref)
  core::A3Consts a3;
  core::FlConsts fl;
};

// The element kind of the float variants' codes: e4m3 (vllm-cuda), bf16 (ref-bf16).
DSA_HD constexpr dsa::indexer::ascend_li::core::Elem fl_elem(int variant) {
  return variant == 1 ? dsa::indexer::ascend_li::core::Elem::e4m3 : dsa::indexer::ascend_li::core::Elem::bf16;
}

// Row t, position j < C: the score and bound of cpu.cpp's row_scores (entry j at ascend_li::key_slot; per head
// h = 0..H-1 in turn the a3 int8 dot and core::a3_head, or the float variants' dot64 of the exactly decoded codes and
// core::fl_head; then a3_finish / fl_finish with the key scale), or -inf / 0 (score_buffers) for j >= nvis.
// `e` is fl_elem(variant) (a compile-time constant in the kernels).
DSA_HD inline void score_thread(const CudaJob& d, dsa::indexer::ascend_li::core::Elem e, std::int64_t t, std::int64_t j, double& score,
                                double& bound) {
  namespace lc = dsa::indexer::ascend_li::core;
  using i64 = std::int64_t;
  if (j >= d.row_nvis[t]) {
    score = lc::neg_inf();
    bound = 0.0;
    return;
  }
  const i64 slot = d.slot(t, j);
  if (d.variant == 0) {
    const std::int8_t* q = static_cast<const std::int8_t*>(d.query) + t * d.H * d.D;
    const std::int8_t* k = static_cast<const std::int8_t*>(d.key) + slot * d.D;
    core::A3Acc acc;
    for (i64 h = 0; h < d.H; ++h) {
      const std::int8_t* qh = q + h * d.D;
      std::int32_t I = 0;  // |I| <= D 2^14 < 2^31 (parse: D <= 2^16): exact in any order
#if defined(__CUDA_ARCH__)
      if (d.D % 4 == 0) {  // every row then starts on a 4-byte boundary (cudaMalloc'd bases)
        const int* qw = reinterpret_cast<const int*>(qh);
        const int* kw = reinterpret_cast<const int*>(k);
        for (i64 x = 0; x < d.D / 4; ++x) I = __dp4a(qw[x], kw[x], I);
      } else
#endif
        for (i64 x = 0; x < d.D; ++x) I += static_cast<std::int32_t>(qh[x]) * static_cast<std::int32_t>(k[x]);
      core::a3_head(acc, I, d.weights[t * d.H + h], d.a3);
    }
    core::a3_finish(acc, core::fp16_f64(static_cast<const std::uint16_t*>(d.key_scale)[slot]), d.a3, score, bound);
    return;
  }
  const i64 q0 = t * d.H * d.D, k0 = slot * d.D;
  const void* q = d.query;
  const void* key = d.key;
  core::FlAcc acc;
  for (i64 h = 0; h < d.H; ++h) {
    const i64 qh = q0 + h * d.D;
    double s, a;
    lc::dot64([=](i64 x) { return lc::widen(q, e, qh + x); }, [=](i64 x) { return lc::widen(key, e, k0 + x); }, d.D, s, a);
    core::fl_head(acc, s, a, d.weights[t * d.H + h], d.fl);
  }
  const double ks = d.fl.ref ? 1.0 : static_cast<double>(static_cast<const float*>(d.key_scale)[slot]);
  core::fl_finish(acc, ks, d.fl, score, bound);
}

// scores, bounds [T, C] (host memory): score_thread for every (t, j < C), on the GPU (cuda.cu) or on the host.
void scores_cuda(const CudaJob& job, double* scores, double* bounds);
void scores_host(const CudaJob& job, double* scores, double* bounds);

}  // namespace dsa::v4::indexer
