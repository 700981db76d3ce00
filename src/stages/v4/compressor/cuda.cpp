// v4.compressor, the CUDA implementation's host side: the step of the CPU reference (run_step, cpu.cpp) with the
// projections on the GPU (project_cuda, cuda.cu: the same fma chains), then the same packaging (package). Same bytes as
// cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/v4/compressor/cuda.hpp"
#include "stages/v4/compressor/stage.hpp"

namespace dsa::v4::compressor {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  return package(p, run_step(c, p, Bug::none, opt.thread_count(), &project_cuda));
}

}  // namespace dsa::v4::compressor
#endif
