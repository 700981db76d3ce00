// Kernel profile `deepgemm-sm90`: DeepGEMM's fp8_mqa_logits / fp8_paged_mqa_logits on Hopper (sm_90a), emulated
// bit for bit from the measured WGMMA model of ../shared/specs/sm90_fp8_wgmma.md (sm90.hpp) and the kernel's
// lane head reduction (logits_row.hpp); the emulation runs on the CPU (sm90.cpp) and on the GPU (emulate_cuda.cu).
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& deepgemm_sm90() {
  static const Profile p{
      "deepgemm-sm90",
      "DeepGEMM fp8 MQA logits on Hopper WGMMA: 32-element chunks aligned to the largest exponent, truncation to "
      "2^(e-13), 14-bit accumulator truncation, the kernel's fmaf lane head reduction (sm90_fp8_wgmma.md)",
      {{"indexer.logits_ragged", "sm90-fp8", true},
       {"indexer.logits_paged", "sm90-fp8", true},
       // the fused indexer's logits are fp8_paged_mqa_logits': with this profile its top-k band is exact on them
       {"indexer.fused", "", false}},
      {}};
  return p;
}

}  // namespace dsa::profiles
