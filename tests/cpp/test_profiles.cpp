// The profile table against the stage table: every stage a profile serves exists, every stage's default producer
// serves it, and the attrs naming the producer are declared exactly where a profile serves (issue #33 item 2).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "profiles/profiles.hpp"
#include "stage/stage.hpp"

namespace dsa {
namespace {

bool declares(const Stage& s, const char* attr) {
  return std::any_of(s.schema.attrs.begin(), s.schema.attrs.end(), [&](const AttrSpec& a) { return a.name == attr; });
}

}  // namespace

TEST_CASE("profiles: every served stage exists, defaults serve their stage, names are unique") {
  std::set<std::string> names;
  for (const Profile* p : kernel_profiles()) {
    CHECK(names.insert(p->name).second);
    for (const auto& a : p->aliases) CHECK(names.insert(a).second);
    CHECK(find_profile(p->name) == p);
    for (const auto& s : p->serves) {
      INFO(p->name << " serves " << s.stage);
      CHECK(find_stage(s.stage) != nullptr);
      if (!s.tolerance.empty()) CHECK(find_tolerance_policy(s.tolerance) != nullptr);
    }
  }
  CHECK(find_profile("ref-bf16") == &profiles::ref());
  CHECK(find_profile("deepgemm_sm90") == nullptr);
  for (const Stage& st : stages()) {
    INFO(st.name);
    const bool served = !profiles_serving(st.name).empty();
    CHECK(declares(st, "kernel") == served);
    CHECK(declares(st, "variant") == served);
    if (!st.default_profile.empty()) {
      const Profile* d = find_profile(st.default_profile);
      REQUIRE(d != nullptr);
      CHECK(d->on(st.name) != nullptr);
    }
  }
}

TEST_CASE("profiles: resolve_profile reads kernel and variant as one attr") {
  std::vector<Problem> pr;
  Case c;
  c.name = "c";
  c.stage = "v4.indexer";
  CHECK(resolve_profile(c, c.stage, "ascend-a3", pr) == &profiles::ascend_a3());  // the stage's default
  c.attrs["variant"] = std::string("ref-bf16");
  CHECK(resolve_profile(c, c.stage, "ascend-a3", pr) == &profiles::ref());
  c.attrs["kernel"] = std::string("ref");
  CHECK(resolve_profile(c, c.stage, "ascend-a3", pr) == &profiles::ref());  // same producer under both attrs
  CHECK(pr.empty());
  c.attrs["kernel"] = std::string("vllm-cuda");
  CHECK(resolve_profile(c, c.stage, "ascend-a3", pr) == nullptr);
  REQUIRE(pr.size() == 1);
  CHECK(pr[0].found == "kernel names vllm-cuda, variant names ref");
  pr.clear();
  c.attrs.erase("variant");
  c.attrs["kernel"] = std::string("deepgemm-sm90");
  CHECK(resolve_profile(c, c.stage, "ascend-a3", pr) == nullptr);
  REQUIRE(pr.size() == 1);
  CHECK(pr[0].expected == "a profile serving v4.indexer (ascend-a3, vllm-cuda, ref)");
}

}  // namespace dsa
