// attn.sparse_mla_decode, the CUDA implementation: the reference (run, cpu.cpp) on the sparse attention row engine's CUDA
// backend (engines/sparse_attn/sparse_attn_cuda.cu). Same bits as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/attn/sparse_mla_decode/stage.hpp"

namespace dsa::attn::sparse_mla_decode {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, opt, Backend::cuda); }

}  // namespace dsa::attn::sparse_mla_decode
#endif
