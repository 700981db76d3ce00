// v41.indexer_k, the CUDA implementation's host side: the writing tokens' keys (k_norm and RoPE with their bounds) on
// the GPU (cuda.cu), then the CPU's quantization with candidates and packaging (run). Same bytes as cpu.cpp
// (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "stages/v41/indexer_k/core.hpp"
#include "stages/v41/indexer_k/cuda.hpp"
#include "stages/v41/indexer_k/stage.hpp"

namespace dsa::v41::indexer_k {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& cs = c.input("cos_sin_cache");
  const std::vector<std::int64_t> emit = emitting(c, p, Bug::none);
  std::vector<std::int64_t> group(emit.size());
  for (std::size_t k = 0; k < emit.size(); ++k) group[k] = c.input("positions").int_at(emit[k]) / p.r * p.r;  // checked by parse
  std::vector<double> y(emit.size() * core::kD), ey(y.size());
  if (cs.dim(0) > 0) {
    CudaKeyJob j;
    j.E = static_cast<std::int64_t>(emit.size()), j.T = p.T, j.rows = cs.dim(0), j.eps = p.eps;
    j.token = emit.data(), j.group = group.data(), j.k_pre = c.input("k_pre").data<std::uint16_t>();
    j.gamma = c.input("norm_weight").data<std::uint16_t>(), j.cos_sin = cs.data<float>();
    keys_cuda(j, y.data(), ey.data());
  }
  return run_with_keys(c, p, opt.thread_count(), y, ey);
}

}  // namespace dsa::v41::indexer_k
#endif
