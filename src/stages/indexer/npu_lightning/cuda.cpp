// indexer.npu_lightning, host side of the CUDA implementation: the kernel's inputs from a case (job), the scores of
// every visible key of every row from the device (cuda.cu) or from the same per-thread body run on the host
// (scores_host, for the ctest without a GPU), then the same host code as the CPU reference:
// engines::ascend_li::topk_from_scores (selection, k-th values, index maps). Same bytes as cpu.cpp (dsa-check backend-diff).
// The selftest's Bug paths stay on the CPU (run()).
#include <memory>
#include <vector>

#include "stages/indexer/npu_lightning/core.hpp"
#include "stages/indexer/npu_lightning/cuda_api.hpp"

namespace dsa::indexer::npu_lightning {

namespace {

using i64 = std::int64_t;

// The kernel's inputs for a case, and the score / bound buffers it fills.
struct Job {
  std::shared_ptr<std::vector<engines::ascend_li::Row>> rows;
  engines::ascend_li::PagedRowsHost h;
  CudaJob job;
};

Job job_of(const Case& c, const Params& p) {
  Job j;
  const Tensor& query = c.input("query");
  j.rows = std::make_shared<std::vector<engines::ascend_li::Row>>(rows_of(c, p));
  CudaJob& d = j.job;
  engines::ascend_li::bind_rows(*j.rows, p.g, p.H, p.D, c.input("block_table"), j.h, d);
  engines::ascend_li::widen(c.input("weights"), 0, p.T * p.H, j.h.w.data());
  d.query = query.raw();
  d.key = c.input("key").raw();
  d.elem = engines::ascend_li::elem_of(query);
  d.k = consts(p);
  return j;
}

Expected finish(const Case& c, const Params& p, Job& j, int threads) {
  Expected e;
  e.tensors.push_back(engines::ascend_li::topk_from_scores(c, "sparse_indices", j.rows, p.k, std::move(j.h.scores), std::move(j.h.bounds), threads));
  return e;
}

}  // namespace

void scores_host(const CudaJob& job, double* scores, double* bounds) {
  for (i64 t = 0; t < job.T; ++t)
    for (i64 x = 0; x < job.C; ++x) score_thread(job, job.elem, t, x, scores[t * job.C + x], bounds[t * job.C + x]);
}

Expected cuda_body_on_host(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_host(j.job, j.h.scores.data<double>(), j.h.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}

#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_cuda(j.job, j.h.scores.data<double>(), j.h.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}
#endif

}  // namespace dsa::indexer::npu_lightning
