// Kernel profile `vllm-torch`: vLLM's torch logits fallbacks (hw_agnostic/attention/kernels/fp8_logits_torch.py, used
// where DeepGEMM is absent: CUDA without DeepGEMM, ROCm without AITER, the CPU path; v4 spec §10 "Logits fallback").
// fp8_mqa_logits_torch rounds each head's score to bf16 (a bf16 einsum) before the fp32 scale, relu, weight and head
// sum; fp8_paged_mqa_logits_torch keeps the head scores in fp32. The arithmetic, the derived per-logit bound and the
// fixed-order emulation: src/engines/logits/torch_logits_core.hpp. The bound is binding (policy derived-bound); the
// emulation only upgrades a match to BITEXACT (torch's GEMM and head-sum orders are not fixed, so a differing output
// is judged by the bound). indexer.fused is not served: the torch fallback is not a fused kernel (its logits exist).
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& vllm_torch() {
  static const Profile p{
      "vllm-torch",
      "vLLM's torch fp8 MQA logits fallbacks (no DeepGEMM): ragged = bf16 einsum (each head score rounded to bf16), "
      "fp32 scale, relu, weight, head sum in torch's order; paged = the same in fp32 without the bf16 rounding. "
      "Judged by a derived per-logit bound; a match with the fixed-order emulation is BITEXACT",
      {{"indexer.logits_ragged", "derived-bound", true, false}, {"indexer.logits_paged", "derived-bound", true, false}},
      {}};
  return p;
}

}  // namespace dsa::profiles
