// Kernel profile `vllm-cuda`: vLLM's CUDA DeepSeek-V4 path (Triton / torch kernels; ../shared/specs/
// v4_compressor_indexer_swa.md §10): the compressor's fp32 pipeline with the reference's FP8 QAT, the e4m3 indexer
// with fp32 power-of-two scales, and the fp8 indexer q path (fused_indexer_q_rope_quant) on v4.indexer_prolog.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& vllm_cuda() {
  static const Profile p{"vllm-cuda",
                         "vLLM's CUDA DeepSeek-V4 kernels (v4 spec §10): fp32 compressor + FP8 QAT, e4m3 indexer with fp32 "
                         "power-of-two scales; judged by the stages' derived bounds",
                         {{"v4.compressor", "", false}, {"v4.indexer", "", false}, {"v4.indexer_prolog", "", false}},
                         {}};
  return p;
}

}  // namespace dsa::profiles
