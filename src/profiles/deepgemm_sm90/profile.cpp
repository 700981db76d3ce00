#include "profiles/deepgemm_sm90/profile.hpp"

namespace dsa::profiles {

Profile deepgemm_sm90() {
  return {kDeepgemmSm90,
          "DeepGEMM fp8 MQA logits on Hopper WGMMA: 32-element chunks aligned to the largest exponent, truncation to "
          "2^(e-13), 14-bit accumulator truncation, the kernel's fmaf lane head reduction (sm90_fp8_wgmma.md)",
          {"indexer.logits_ragged", "indexer.logits_paged"},
          "sm90-fp8"};
}

}  // namespace dsa::profiles
