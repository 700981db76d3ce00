#include "profiles/profile.hpp"

#include <algorithm>
#include <cmath>

#include "profiles/profiles.hpp"

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

const ProfileStage* Profile::on(const std::string& stage) const {
  for (const auto& s : serves)
    if (s.stage == stage) return &s;
  return nullptr;
}

bool Profile::emulates(const std::string& stage) const {
  const ProfileStage* s = on(stage);
  return s && s->emulation;
}

bool Profile::named(const std::string& s) const {
  return s == name || std::find(aliases.begin(), aliases.end(), s) != aliases.end();
}

// THE table: one line per folder under src/profiles/.
const std::vector<const Profile*>& kernel_profiles() {
  static const std::vector<const Profile*> all{
      &profiles::deepgemm_sm90(),  // DeepGEMM fp8 MQA logits on Hopper (bit-exact emulation)
      &profiles::flashmla_sm90(),  // FlashMLA sparse attention on Hopper
      &profiles::ascend_a3(),      // Ascend A3 (910C) ops of vLLM-Ascend / CANN
      &profiles::ascend_950(),     // Ascend 950 lightning indexer
      &profiles::vllm_cuda(),      // vLLM's CUDA (Triton / torch) DeepSeek-V4 path
      &profiles::vllm_torch(),     // vLLM's torch fp8 MQA logits fallbacks (no DeepGEMM)
      &profiles::ref(),            // the DeepSeek reference inference code
  };
  return all;
}

const Profile* find_profile(const std::string& name) {
  for (const Profile* p : kernel_profiles())
    if (p->named(name)) return p;
  return nullptr;
}

std::vector<const Profile*> profiles_serving(const std::string& stage) {
  std::vector<const Profile*> v;
  for (const Profile* p : kernel_profiles())
    if (p->on(stage)) v.push_back(p);
  return v;
}

std::string profile_names(const std::vector<const Profile*>& ps) {
  std::string names;
  for (const Profile* p : ps) names += (names.empty() ? "" : ", ") + p->name;
  return names.empty() ? "none" : names;
}

std::vector<AttrSpec> profile_attrs(const std::string& stage, const std::string& default_profile) {
  std::vector<std::string> names;
  for (const Profile* p : profiles_serving(stage)) {
    names.push_back(p->name);
    for (const auto& a : p->aliases) names.push_back(a);
  }
  if (names.empty()) return {};
  const std::string dflt = default_profile.empty() ? "" : " (default " + default_profile + ")";
  return {opt_str_attr("kernel", names,
                       "producing kernel, a profile serving this stage" + dflt +
                           ": its arithmetic, tolerance and (where it has one) bit-exact emulation; dsa-check stages lists them"),
          opt_str_attr("variant", names, "older spelling of attr kernel (same values, same meaning)")};
}

const Profile* resolve_profile(const Case& c, const std::string& stage, const std::string& default_profile,
                               std::vector<Problem>& problems) {
  const auto serving = profiles_serving(stage);
  const Profile* chosen = nullptr;
  for (const char* attr : {"kernel", "variant"}) {
    auto it = c.attrs.find(attr);
    if (it == c.attrs.end()) continue;
    const auto* name = std::get_if<std::string>(&it->second);
    if (!name) continue;  // the schema check reports the type
    const Profile* p = find_profile(*name);
    const std::string where = std::string("attr ") + attr;
    if (!p) {
      problems.push_back({c.file, c.name, where, "a profile serving " + stage + " (" + profile_names(serving) + ")",
                          "'" + *name + "' (unknown profile)"});
      return nullptr;
    }
    if (!p->on(stage)) {
      problems.push_back({c.file, c.name, where, "a profile serving " + stage + " (" + profile_names(serving) + ")",
                          "'" + *name + "' (profile " + p->name + " serves " +
                              [&] {
                                std::string s;
                                for (const auto& x : p->serves) s += (s.empty() ? "" : ", ") + x.stage;
                                return s;
                              }() +
                              ")"});
      return nullptr;
    }
    if (chosen && chosen != p) {
      problems.push_back({c.file, c.name, "attrs kernel, variant", "one producer (variant is the older spelling of kernel)",
                          "kernel names " + chosen->name + ", variant names " + p->name});
      return nullptr;
    }
    chosen = p;
  }
  if (!chosen && !default_profile.empty()) chosen = find_profile(default_profile);
  return chosen;
}

}  // namespace dsa
