// v4.indexer_prolog, the CUDA implementation's host side: the reference's host code (run_with, cpu.cpp: the RoPE
// rows, the packaging, the cache scatter) with its row loops on the device (cuda.cu running core.hpp's functions).
// Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/v4/indexer_prolog/cuda.hpp"
#include "stages/v4/indexer_prolog/stage.hpp"

namespace dsa::v4::indexer_prolog {

Expected cuda(const Case& c, const Params& p, const RefOptions&) {
  using i64 = std::int64_t;
  RowLoops loops;
  loops.rotate = [&](const std::uint16_t* pre, i64 T, i64 H, i64 D, const float* cs, const float* sn, std::uint16_t* out, double* bound) {
    rotate_rows_cuda(pre, T, H, D, cs, sn, p.hadamard, out, bound);
  };
  loops.quant = [&](const std::uint16_t* x, i64 R, i64 D, std::int8_t* codes, std::uint16_t* scales) {
    quant_rows_cuda(x, R, D, p.amax_zero, codes, scales);
  };
  loops.weights = [](const std::uint16_t* w, i64 n, std::uint16_t* out) { weights_cuda(w, n, out); };
  loops.vq = [](const std::uint16_t* x, i64 T, i64 H, i64 D, const float* cs, const float* sn, const float* w, float sm, float hs,
                std::uint8_t* codes, double* bound, float* wout, double* wbound) {
    vllm_q_cuda(x, T, H, D, cs, sn, w, sm, hs, codes, bound, wout, wbound);
  };
  return run_with(c, p, loops);
}

}  // namespace dsa::v4::indexer_prolog
#endif
