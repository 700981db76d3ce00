// v4.indexer, the CUDA implementation's host side: the case's score job (cpu.cpp's job_of), the scores of every
// visible entry of every row from the device (cuda.cu running core::score_thread), then the same host code as the
// CPU reference (finish: selection, k-th values, index maps, sparse_values). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/v4/indexer/cuda.hpp"
#include "stages/v4/indexer/stage.hpp"

namespace dsa::v4::indexer {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  Job j = job_of(c, p);
  scores_cuda(j.job, j.h.scores.data<double>(), j.h.bounds.data<double>());
  return finish(c, p, j, opt.thread_count());
}

}  // namespace dsa::v4::indexer
#endif
