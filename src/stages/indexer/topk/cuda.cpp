// indexer.topk, the CUDA implementation's host side: the logits widened to fp32 and every row's canonical selection
// on the GPU (cuda.cu), then the same host code as the CPU reference (assemble with the device's picks: scores, k-th
// values, index maps). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <algorithm>
#include <cstring>
#include <vector>

#include "stages/indexer/topk/cuda.hpp"
#include "stages/indexer/topk/stage.hpp"

namespace dsa::indexer::topk {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& logits = c.input("logits");
  const std::int64_t R = logits.dim(0), C = logits.dim(1), k = std::max<std::int64_t>(p.k, 0);
  const layouts::IndexMap m = index_map(c, p);
  std::vector<float> sc(static_cast<std::size_t>(R * C));  // every logits dtype widens exactly to fp32
  if (logits.dtype() == DType::f32) std::memcpy(sc.data(), logits.data<float>(), sc.size() * 4);
  else
    for (std::int64_t i = 0; i < R * C; ++i) sc[static_cast<std::size_t>(i)] = static_cast<float>(logits.value(i));
  RowPicks picks;
  picks.sel.resize(static_cast<std::size_t>(R * k));
  picks.last.resize(static_cast<std::size_t>(R));
  select_cuda(sc.data(), R, C, m.start.data(), m.len.data(), k, p.num_init, p.num_local, picks.sel.data(), picks.last.data());
  return assemble(c, p, opt, &picks);
}

}  // namespace dsa::indexer::topk
#endif
