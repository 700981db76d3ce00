// Kernel profiles and tolerance policies: named objects, never free strings.
//
// A kernel profile (`deepgemm-sm90`, later `ascend-a3`, `flashmla-sm90`, ...) is a real kernel whose rounding the
// tool can reproduce bit for bit. It declares the stages it emulates and the tolerance its output is judged by when
// the emulation is off. A case names its producing kernel with the `kernel` attr; the attr's choices are the
// profiles that emulate the case's stage, so a misspelt name is a schema error listing the known ones. Each profile
// lives in its own folder (src/profiles/<name>/) with its numeric primitives; the list below is THE table.
//
// A tolerance policy is a named bound |out - ref| <= rtol * M + atol for bounded comparisons.
#pragma once
#include <string>
#include <vector>

#include "schema/schema.hpp"

namespace dsa {

struct TolerancePolicy {
  std::string name;
  double rtol = 0.0;
  double atol = 0.0;
  std::string doc;
};
const std::vector<TolerancePolicy>& tolerance_policies();
const TolerancePolicy* find_tolerance_policy(const std::string& name);
std::string tolerance_policy_names();  // "exact, fp32-reassoc, ..." for messages

struct Profile {
  std::string name;                 // the `kernel` attr value, e.g. "deepgemm-sm90"
  std::string doc;
  std::vector<std::string> stages;  // stages whose reference can compute this kernel's exact bits
  std::string tolerance;            // tolerance policy of this kernel's output when judged by bound
  bool emulates(const std::string& stage) const;
};
const std::vector<Profile>& kernel_profiles();
const Profile* find_profile(const std::string& name);

// The `kernel` attr of a stage: optional, its choices the profiles that emulate `stage`.
AttrSpec kernel_attr(const std::string& stage);

}  // namespace dsa
