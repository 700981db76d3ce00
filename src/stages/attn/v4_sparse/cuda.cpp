// attn.v4_sparse, the CUDA implementation: the reference (run_on, cpu.cpp) on the sparse attention row engine's CUDA
// backend (engines/sparse_attn/sparse_attn_cuda.cu). Same bits as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/attn/v4_sparse/stage.hpp"

namespace dsa::attn::v4_sparse {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) { return run_on(c, p, Bug::none, opt.thread_count(), Backend::cuda); }

}  // namespace dsa::attn::v4_sparse
#endif
