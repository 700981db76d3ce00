// indexer.npu_lightning, the CUDA implementation's host side: the case's score job (cpu.cpp's job_of), the scores of
// every visible key of every row from the device (cuda.cu running core::score_thread), then the same host code as the
// CPU reference (finish: selection, k-th values, index maps). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/indexer/npu_lightning/cuda.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"

namespace dsa::indexer::npu_lightning {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_cuda(j.job, j.h.scores.data<double>(), j.h.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}

}  // namespace dsa::indexer::npu_lightning
#endif
