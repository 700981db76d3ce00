// The profile objects, one per folder under src/profiles/ (each folder's profile.cpp defines its accessor). Stages
// whose arithmetic depends on the producer compare the resolved profile with these by identity, never by name.
#pragma once
#include "profiles/profile.hpp"

namespace dsa::profiles {

const Profile& deepgemm_sm90();
const Profile& flashmla_sm90();
const Profile& ascend_a3();
const Profile& ascend_950();
const Profile& vllm_cuda();
const Profile& vllm_torch();
const Profile& ref();

}  // namespace dsa::profiles
