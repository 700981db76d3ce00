#include "profiles/profile.hpp"

#include <algorithm>
#include <cmath>

#include "profiles/deepgemm_sm90/profile.hpp"

namespace dsa {

const std::vector<TolerancePolicy>& tolerance_policies() {
  static const std::vector<TolerancePolicy> p{
      {"exact", std::ldexp(1.0, -22), 0.0,
       "CPU-exact kernels: the result may differ from the exactly rounded value by a few fp32 ulps of M"},
      {"fp32-reassoc", std::ldexp(1.0, -16), 0.0,
       "exact fp8 products, fp32 accumulation in any order (CUDA-core / emulated kernels)"},
      {"sm90-fp8", std::ldexp(1.0, -10), 0.0,
       "Hopper fp8 WGMMA (13-bit aligned truncating accumulation); real DeepGEMM output (H200, shared data) deviates up "
       "to 3.1e-4 M (ragged H = 32): a 3x margin"},
      // Kernel and reference each round to bf16 once, so they may land one bf16 ulp apart (2^-7 |ref| <= 2^-7 M),
      // on top of the sm90 accumulation error (2^-10 M). Real DeepGEMM bf16 logits need 0.0055..0.0068.
      {"bf16-logits", std::ldexp(1.0, -7) + std::ldexp(1.0, -10), 0.0,
       "logits stored as bf16: one bf16 ulp (2^-7 M) on top of sm90-fp8 (2^-10 M)"},
      {"derived-bound", 1.0, 0.0,
       "M is the stage's own per-element error bound, derived from the kernel's documented arithmetic (the stage's "
       "comment); rtol 1 = that bound, so max err/M is the fraction of the bound used"},
  };
  return p;
}

const TolerancePolicy* find_tolerance_policy(const std::string& name) {
  for (const auto& p : tolerance_policies())
    if (p.name == name) return &p;
  return nullptr;
}

std::string tolerance_policy_names() {
  std::string names;
  for (const auto& q : tolerance_policies()) names += (names.empty() ? "" : ", ") + q.name;
  return names;
}

bool Profile::emulates(const std::string& stage) const {
  return std::find(stages.begin(), stages.end(), stage) != stages.end();
}

const std::vector<Profile>& kernel_profiles() {
  static const std::vector<Profile> all{profiles::deepgemm_sm90()};
  return all;
}

const Profile* find_profile(const std::string& name) {
  for (const auto& p : kernel_profiles())
    if (p.name == name) return &p;
  return nullptr;
}

AttrSpec kernel_attr(const std::string& stage) {
  std::vector<std::string> names;
  for (const auto& p : kernel_profiles())
    if (p.emulates(stage)) names.push_back(p.name);
  return opt_str_attr("kernel", names,
                      "producing kernel: a registered profile (dsa-check stages lists them); its output must be bit-exact "
                      "vs the profile's emulation, and --no-emulation judges it by the profile's tolerance");
}

}  // namespace dsa
