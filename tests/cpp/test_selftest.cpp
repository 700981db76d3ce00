// `dsa-check selftest` as a ctest test: plausible outputs pass, every mutant is caught with its expected verdict;
// plus the CLI exit codes of `check` (0 pass, 1 failures, 2 I/O / usage) on files the selftest writes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "compare/compare.hpp"
#include "selftest/mutants.hpp"
#include "selftest/selftest.hpp"
#include "stages/registry.hpp"

using namespace dsa;

TEST_CASE("selftest: plausible outputs pass and every mutant is caught (mutation score 100 %)") {
  for (std::uint64_t seed : {1u, 7u}) {
    selftest::SelftestOptions o;
    o.seed = seed;
    std::ostringstream out;
    const auto s = selftest::run_selftest(o, out);
    INFO(out.str());
    CHECK(s.skipped == 0);
    CHECK(s.base_total >= 9);
    CHECK(s.base_pass == s.base_total);
    CHECK(s.mutants_total >= 12);
    CHECK(s.killed == s.mutants_total);
    CHECK(selftest::selftest_exit_code(s, o) == 0);
    CHECK(out.str().find("mutation score: " + std::to_string(s.killed) + "/" + std::to_string(s.mutants_total) + " (100.0 %)") !=
          std::string::npos);
  }
}

TEST_CASE("selftest: mutant library covers the bug list and is well formed") {
  std::set<std::string> names, bugs, bases;
  for (const auto& c : selftest::base_cases(1)) bases.insert(c.name);
  for (const auto& m : selftest::mutants()) {
    CHECK(names.insert(m.name).second);
    CHECK(bases.count(m.base) == 1);
    CHECK(!m.expect.empty());
    bugs.insert(m.bug);
  }
  CHECK(selftest::mutants().size() >= 12);
  for (const char* b : {"B1", "B2", "B3", "B4", "B5", "B6", "B7", "B9", "B11", "B12", "B14", "B15", "B22"}) CHECK(bugs.count(b) == 1);
}

TEST_CASE("selftest: plausible_outputs is deterministic in the seed and differs across seeds") {
  auto cases = selftest::base_cases(3);
  for (auto& c : cases) {
    if (c.stage != "indexer.logits_ragged" && c.stage != "indexer.topk") continue;
    RefOptions ro;
    if (auto e = cmp::requested_emulation(c, {}); !e.empty()) ro.emulations.push_back(e);
    const Expected E = find_stage(c.stage)->reference(c, ro);
    Case a = c, b = c, d = c;
    selftest::plausible_outputs(a, E, 11);
    selftest::plausible_outputs(b, E, 11);
    selftest::plausible_outputs(d, E, 12);
    for (const auto& [n, t] : a.outputs) {
      CHECK(t.same_bytes(b.outputs.at(n)));
      if (c.name == "ragged" || c.name == "topk_rel") CHECK(!t.same_bytes(d.outputs.at(n)));
    }
  }
}

#ifdef DSA_CHECK_BIN
namespace {
int run(const std::string& args, std::string* out = nullptr) {
  const std::string log = std::filesystem::temp_directory_path() / ("dsa_st_cli_" + std::to_string(::getpid()) + ".log");
  const int st = std::system((std::string(DSA_CHECK_BIN) + " " + args + " > " + log + " 2>&1").c_str());
  if (out) {
    std::ifstream f(log);
    *out = std::string(std::istreambuf_iterator<char>(f), {});
  }
  std::filesystem::remove(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
}  // namespace

TEST_CASE("selftest: check CLI exit codes 0 / 1 / 2 and the summary line") {
  const auto dir = std::filesystem::temp_directory_path() / ("dsa_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string d = dir.string();
  std::string out;
  REQUIRE(run("selftest --write " + d, &out) == 0);
  CHECK(run("check " + d + "/selftest_pass.h5", &out) == 0);
  CHECK(out.find("\n0 failed") == std::string::npos);
  CHECK(out.find(" passed, 0 failed\n") != std::string::npos);
  CHECK(run("check -j 2 --quiet " + d + "/selftest_mutants.h5", &out) == 1);
  CHECK(out.find("first divergence in ") != std::string::npos);
  CHECK(run("check " + d + "/does_not_exist.h5", &out) == 2);
  CHECK(out.find("does_not_exist.h5: no such file") != std::string::npos);
  CHECK(run("check --profile nope " + d + "/selftest_pass.h5", &out) == 2);
  CHECK(run("check --rtol logits:abc " + d + "/selftest_pass.h5", &out) == 2);
  CHECK(run("check --stage 'no.such*' " + d + "/selftest_pass.h5", &out) == 2);
  {
    std::ofstream f(d + "/garbage.h5");
    f << "not an hdf5 file\n";
  }
  CHECK(run("check " + d + "/garbage.h5", &out) == 2);
  std::filesystem::remove_all(dir);
}
#endif
