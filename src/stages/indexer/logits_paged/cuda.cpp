// indexer.logits_paged on the GPU (impl[Backend::cuda]): the paged cache and block table go to the shared CUDA engine
// (engines/logits/logits_cuda.cu, exact int8 tensor-core dots, the CPU's head reduction and certificate through
// engines/logits/logits_core.hpp); the logits whose certificate fails are rounded exactly on the host. Same bytes as cpu.cpp
// (dsa-check backend-diff). Host C++ (the device code is engines/logits/logits_cuda.cu).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "layouts/indexer_kcache.hpp"
#include "profiles/profiles.hpp"
#include "engines/logits/logits_cuda.hpp"
#include "engines/logits/logits_engine.hpp"
#include "stages/indexer/logits_paged/stage.hpp"

namespace dsa::indexer::logits_paged {

using namespace engines::logits;

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor cache = layouts::indexer_kcache_to_planar(c.input("kv_cache"), p.order);  // the engine reads planar pages
  const Tensor& cl = c.input("context_lens");
  const Tensor& bt = c.input("block_table");
  const float* w = c.input("weights").data<float>();
  const i64 B = q.dim(0), NN = q.dim(1), H = q.dim(2), D = q.dim(3), cols = p.max_context_len;
  const layouts::IndexerKCacheView kvv = layouts::IndexerKCacheView::of(cache);
  const i64 ps = kvv.layout.page_size, MB = bt.dim(1), R = B * NN;
  const i64 r0 = opt.row_begin, r1 = opt.rows_end(R), RL = r1 - r0;
  std::vector<i64> lo(static_cast<sz>(RL), 0), hi(lo.size()), col0(lo.size(), 0), batch(lo.size());
  for (i64 i = 0; i < RL; ++i) {
    const i64 r = r0 + i;
    hi[static_cast<sz>(i)] = valid_columns(cl.data<std::int32_t>(), cl.rank() == 2, r / NN, r % NN, NN, cols, MB * ps);
    batch[static_cast<sz>(i)] = r / NN;
  }
  const std::uint8_t* qc = q.data<std::uint8_t>() + r0 * H * D;
  const std::int32_t* btp = bt.data<std::int32_t>();
  GpuLogitsJob job;
  job.H = static_cast<int>(H);
  job.D = static_cast<int>(D);
  job.rows = RL;
  job.q = qc;
  job.w = w + r0 * H;
  job.cache = cache.data<std::uint8_t>();
  job.num_pages = kvv.num_pages;
  job.page_size = ps;
  job.block_table = btp;
  job.batches = B;
  job.table_width = MB;
  job.lo = lo.data();
  job.hi = hi.data();
  job.col0 = col0.data();
  job.batch = batch.data();
  job.cols = cols;
  job.all_defined = p.clean_logits;
  LogitsTensors lt(RL, cols, p.bf16, Tensor::Uninit{});
  run_gpu_logits(job, lt, [&](i64 r, i64 j) {
    const i64 b = batch[static_cast<sz>(r)], page = btp[b * MB + j / ps];
    return exact_from_codes(qc + r * H * D, kvv.values(page, j % ps), job.w + r * H, kvv.scale(page, j % ps), job.H, job.D, p.bf16);  // planar
  }, opt.emulates(profiles::deepgemm_sm90()));
  return assemble(c, p, opt, lt);
}

}  // namespace dsa::indexer::logits_paged
#endif
