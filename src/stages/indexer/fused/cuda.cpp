// indexer.fused, the CUDA implementation's host side: indexer.logits_paged's exact logits on its CUDA backend (the
// logits engine's kernels), then the same top-k and bands as the CPU reference (reference, cpu.cpp). Same bytes as
// cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/indexer/fused/stage.hpp"

namespace dsa::indexer::fused {

Expected cuda(const Case& c, const Params& p, const RefOptions& opt) { return reference(c, p, opt, Backend::cuda); }

}  // namespace dsa::indexer::fused
#endif
