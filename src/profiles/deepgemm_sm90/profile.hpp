// Kernel profile `deepgemm-sm90`: DeepGEMM's fp8_mqa_logits / fp8_paged_mqa_logits on Hopper (sm_90a), emulated
// bit for bit from the measured WGMMA model of ../shared/specs/sm90_fp8_wgmma.md (sm90.hpp) and the kernel's
// lane head reduction (logits_row.hpp).
#pragma once
#include "profiles/profile.hpp"

namespace dsa::profiles {

inline constexpr const char* kDeepgemmSm90 = "deepgemm-sm90";
Profile deepgemm_sm90();

}  // namespace dsa::profiles
