// Kernel identities (profiles) and tolerance policies: named objects, never free strings.
//
// A kernel profile is one producer of kernel output: DeepGEMM on Hopper (`deepgemm-sm90`), FlashMLA's sm90 kernels
// (`flashmla-sm90`), the Ascend A3 / 950 ops (`ascend-a3`, `ascend-950`), vLLM's CUDA path (`vllm-cuda`), the
// DeepSeek reference inference code (`ref`), ... Each lives in its own folder src/profiles/<name>/ and declares the
// stages it serves: for each, the tolerance its output is judged by and whether the reference can compute its exact
// bits (an emulation, RefTensor::emulations). A stage whose arithmetic depends on the producer (the V4 stages' Ascend
// vs CUDA vs reference pipelines) reads the resolved profile (AttrReader::profile()) and compares it by identity.
//
// A case names its producer with attr `kernel` or, in older dumps, `variant` (one meaning; both accepted). The
// name is resolved once per case (resolve_profile, called by validate_case) into the BoundCase: an unknown name, a
// known one that does not serve the case's stage, or two attrs naming different producers are errors listing the
// profiles that serve the stage. Without either attr the stage's default profile applies (Stage::default_profile).
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

// What a profile says of one stage it serves.
struct ProfileStage {
  std::string stage;        // "indexer.logits_ragged"
  std::string tolerance;    // policy of this producer's output on the stage ("" = the stage's own)
  bool emulation = false;   // the stage's reference computes this producer's exact bits
  // true: an output within the bound that differs from the emulation FAILs (the producer's order is fixed and known);
  // false: the emulation is one admissible order among many (torch reductions): a match is BITEXACT, a difference is
  // judged by the bound alone.
  bool emulation_required = true;
};

struct Profile {
  std::string name;                  // the `kernel` attr value, e.g. "deepgemm-sm90"
  std::string doc;
  std::vector<ProfileStage> serves;  // the stages this producer's output can be checked on
  std::vector<std::string> aliases;  // older spellings still read from dumps (e.g. v4.indexer's "ref-bf16")
  const ProfileStage* on(const std::string& stage) const;  // null when the profile does not serve `stage`
  bool emulates(const std::string& stage) const;
  bool named(const std::string& s) const;  // the name or an alias
};

// THE profile table (src/profiles/profile.cpp: one line per profile folder).
const std::vector<const Profile*>& kernel_profiles();
const Profile* find_profile(const std::string& name);  // by name or alias; null when unknown
std::vector<const Profile*> profiles_serving(const std::string& stage);
std::string profile_names(const std::vector<const Profile*>& ps);  // "ascend-a3, vllm-cuda" for messages

// The attrs naming a case's producer, declared for every stage some profile serves (the table adds them): `kernel`
// and its older spelling `variant`, optional, their choices the names (and aliases) of the profiles serving `stage`.
std::vector<AttrSpec> profile_attrs(const std::string& stage, const std::string& default_profile);

// The producer a case names (attrs `kernel` / `variant`), else `default_profile` (a name, "" = none). Appends a
// problem for an unknown name, a profile not serving `stage`, or two attrs naming different profiles.
const Profile* resolve_profile(const Case& c, const std::string& stage, const std::string& default_profile,
                               std::vector<Problem>& problems);

}  // namespace dsa
