// v4.indexer, host side of the CUDA implementation (every variant): the kernel's inputs from a case (job), the scores
// of every visible entry of every row from the device (cuda.cu) or from the same per-thread body run on the host
// (scores_host, for the ctest without a GPU), then the same host code as the CPU reference:
// ascend_li::topk_from_scores (selection, k-th values, index maps) and assemble (sparse_values). Same bytes as
// cpu.cpp (dsa-check backend-diff). The selftest's Bug paths stay on the CPU (run()).
#include <vector>

#include "stages/v4/indexer/core.hpp"
#include "stages/v4/indexer/cuda_api.hpp"

namespace dsa::v4::indexer {

namespace {

using i64 = std::int64_t;
namespace li = dsa::indexer::ascend_li;

// The kernel's inputs for a case, and the score / bound buffers it fills.
struct Job {
  std::shared_ptr<const std::vector<Row>> rows;
  li::PagedRowsHost h;
  CudaJob job;
};

Job job_of(const Case& c, const Params& p) {
  Job j;
  const Tensor& weights = c.input("weights");
  const Tensor* ksc = c.input_opt("key_dequant_scale");
  j.rows = rows_of(c, p);
  CudaJob& d = j.job;
  li::bind_rows(*j.rows, p.g, p.H, p.D, c.input("block_table"), j.h, d);
  // [T, H] per-(row, head) operand: a3 wq = fp16(w16 qs16) (core::a3_wq, as row_scores), else the widened weights.
  if (p.variant == Variant::ascend_a3) {
    const std::uint16_t* w16 = weights.data<std::uint16_t>();
    const std::uint16_t* qs16 = c.input("query_dequant_scale").data<std::uint16_t>();
    for (i64 i = 0; i < p.T * p.H; ++i) j.h.w[static_cast<std::size_t>(i)] = core::a3_wq(w16[i], qs16[i], false);
  } else {
    li::widen(weights, 0, p.T * p.H, j.h.w.data());
  }
  d.variant = p.variant == Variant::ascend_a3 ? 0 : p.variant == Variant::vllm_cuda ? 1 : 2;
  d.query = c.input("query").raw();
  d.key = c.input("key").raw();
  d.key_scale = p.variant == Variant::ref_bf16 || !ksc ? nullptr : ksc->raw();
  d.a3 = a3_consts(p);
  d.fl = fl_consts(p);
  return j;
}

Expected finish(const Case& c, const Params& p, Job& j, int threads) {
  return assemble(c, li::topk_from_scores(c, "sparse_indices", j.rows, p.k, std::move(j.h.scores), std::move(j.h.bounds), threads, p.sorted));
}

}  // namespace

void scores_host(const CudaJob& job, double* scores, double* bounds) {
  for (i64 t = 0; t < job.T; ++t)
    for (i64 x = 0; x < job.C; ++x) score_thread(job, fl_elem(job.variant), t, x, scores[t * job.C + x], bounds[t * job.C + x]);
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

}  // namespace dsa::v4::indexer
