// indexer.npu_lightning, host side of the CUDA implementation: the kernel's inputs from a case (job), the scores of
// every visible key of every row from the device (cuda.cu) or from the same per-thread body run on the host
// (scores_host, for the ctest without a GPU), then the same host code as the CPU reference:
// ascend_li::topk_from_scores (selection, k-th values, index maps). Same bytes as cpu.cpp (dsa-check backend-diff).
// The selftest's Bug paths stay on the CPU (run()).
#include <memory>
#include <tuple>
#include <vector>

#include "stages/indexer/npu_lightning/core.hpp"
#include "stages/indexer/npu_lightning/cuda_api.hpp"

namespace dsa::indexer::npu_lightning {

namespace {

using i64 = std::int64_t;

// The kernel's inputs for a case, and the score / bound buffers it fills.
struct Job {
  std::shared_ptr<std::vector<ascend_li::Row>> rows;
  std::vector<double> w;
  std::vector<i64> rb, rn;
  Tensor scores, bounds;
  CudaJob job;
};

Job job_of(const Case& c, const Params& p) {
  Job j;
  const Tensor& query = c.input("query");
  j.rows = std::make_shared<std::vector<ascend_li::Row>>(rows_of(c, p));
  j.w.resize(static_cast<std::size_t>(p.T * p.H));
  ascend_li::widen(c.input("weights"), 0, p.T * p.H, j.w.data());
  j.rb.resize(static_cast<std::size_t>(p.T));
  j.rn.resize(j.rb.size());
  for (std::size_t t = 0; t < j.rb.size(); ++t) j.rb[t] = (*j.rows)[t].b, j.rn[t] = (*j.rows)[t].nvis;
  std::tie(j.scores, j.bounds) = ascend_li::score_buffers(*j.rows);
  CudaJob& d = j.job;
  d.query = query.raw();
  d.key = c.input("key").raw();
  d.elem = ascend_li::elem_of(query);
  d.T = p.T, d.H = p.H, d.D = p.D, d.key_slots = p.g.nblk * p.g.bs;
  d.weights = j.w.data();
  d.block_table = c.input("block_table").data<std::int32_t>();
  d.B = p.g.B, d.maxblk = p.g.maxblk, d.bs = p.g.bs;
  d.row_b = j.rb.data();
  d.row_nvis = j.rn.data();
  d.C = j.scores.dim(1);
  d.k = consts(p);
  return j;
}

Expected finish(const Case& c, const Params& p, Job& j, int threads) {
  Expected e;
  e.tensors.push_back(ascend_li::topk_from_scores(c, "sparse_indices", j.rows, p.k, std::move(j.scores), std::move(j.bounds), threads));
  return e;
}

}  // namespace

void scores_host(const CudaJob& job, double* scores, double* bounds) {
  for (i64 t = 0; t < job.T; ++t)
    for (i64 x = 0; x < job.C; ++x) score_thread(job, job.elem, t, x, scores[t * job.C + x], bounds[t * job.C + x]);
}

Expected cuda_body_on_host(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_host(j.job, j.scores.data<double>(), j.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}

#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_cuda(j.job, j.scores.data<double>(), j.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}
#endif

}  // namespace dsa::indexer::npu_lightning
