// v41.select, the CUDA implementation's host side: the scores widened to fp32 and every row's selection (positions,
// and the published blocks) on the GPU (cuda.cu), then the CPU's packaging with the device's picks (assemble: the
// candidate lists, scores and index maps). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "stages/v41/select/cuda.hpp"
#include "stages/v41/select/stage.hpp"

namespace dsa::v41::select {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& sc = c.input("scores");
  std::vector<float> s(static_cast<std::size_t>(p.S * p.N));  // f32, bf16 and fp16 all widen exactly to fp32
  for (std::int64_t i = 0; i < p.S * p.N; ++i) s[static_cast<std::size_t>(i)] = static_cast<float>(sc.value(i));
  std::vector<std::int64_t> rch(static_cast<std::size_t>(p.S));
  for (std::int64_t r = 0; r < p.S; ++r) rch[static_cast<std::size_t>(r)] = reach(c, p, r);
  const Tensor* cb = c.input_opt("candidate_blocks");
  CudaSelectJob j;
  j.S = p.S, j.N = p.N, j.M = p.M, j.bs = p.block_size, j.cand_layout = p.cand_layout, j.short_ref = p.short_rows_ref;
  j.scores = s.data(), j.reach = rch.data(), j.cand = cb ? cb->data<std::int32_t>() : nullptr;
  auto run = [&](bool blocks, std::int64_t k) {
    RowPicks pk;
    CudaSelectJob b = j;
    b.blocks = blocks, b.k = k;
    pk.k = select_cuda(b, pk.ids, pk.len);
    return pk;
  };
  RowPicks cand = run(false, p.k);
  if (cb && p.cand_layout && !p.short_rows_ref)  // the device's ids are list entries e * bs + t: their positions
    for (std::int64_t r = 0; r < p.S; ++r)
      for (std::int64_t q = 0; q < cand.k; ++q) {
        std::int64_t& id = cand.ids[static_cast<std::size_t>(r * cand.k + q)];
        if (id >= 0) id = cb->int_at(r * p.M + id / p.block_size) * p.block_size + id % p.block_size;
      }
  if (!p.publish) return assemble(c, p, opt, &cand, nullptr);
  const RowPicks blocks = run(true, p.topk_blocks);
  return assemble(c, p, opt, &cand, &blocks);
}

}  // namespace dsa::v41::select
#endif
