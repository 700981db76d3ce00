// `dsa-check selftest` as a ctest test: plausible outputs pass, every mutant is caught with its expected verdict;
// plus the CLI exit codes of `check` (0 pass, 1 failures, 2 I/O / usage) on files the selftest writes.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "compare/compare.hpp"
#include "pipeline/golden.hpp"
#include "pipeline/selftest.hpp"
#include "stage/mutant_kit.hpp"
#include "stage/stage.hpp"

using namespace dsa;

TEST_CASE("selftest: plausible outputs pass and every mutant is caught (mutation score 100 %)") {
#ifdef DSA_TESTS_SANITIZED
  const std::vector<std::uint64_t> seeds{1u};  // under ASan / UBSan once: the release build runs both seeds
#else
  const std::vector<std::uint64_t> seeds{1u, 7u};
#endif
  for (std::uint64_t seed : seeds) {
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
  std::size_t n = 0;
  for (const Stage& st : stages()) {
    std::set<std::string> own;  // a mutant starts from a selftest case of its own stage
    for (const auto& c : st.selftest) {
      CHECK(bases.insert(c.name).second);
      CHECK(c.stage == st.name);
      own.insert(c.name);
    }
    for (const auto& m : st.mutants) {
      CHECK(names.insert(m.name).second);
      CHECK(own.count(m.base) == 1);
      CHECK(!m.expect.empty());
      bugs.insert(m.bug);
      ++n;
    }
  }
  CHECK(n >= 22);
  for (const char* b : {"B1", "B2", "B3", "B4", "B5", "B6", "B7", "B9", "B11", "B12", "B14", "B15", "B22"}) CHECK(bugs.count(b) == 1);
}

TEST_CASE("selftest: plausible_outputs is deterministic in the seed and differs across seeds") {
  for (const char* stage : {"indexer.logits_ragged", "indexer.topk"}) {
    for (const auto& spec : find_stage(stage)->selftest) {
    Case c = golden::make_case(spec, 3, 0);
    c.expected.clear();
    const Expected E = mutant::reference_for_check(c);
    Case a = c, b = c, d = c;
    mutant::plausible_outputs(a, E, 11);
    mutant::plausible_outputs(b, E, 11);
    mutant::plausible_outputs(d, E, 12);
    for (const auto& [n, t] : a.outputs) {
      CHECK(t.same_bytes(b.outputs.at(n)));
      if (c.name == "ragged" || c.name == "topk_rel") CHECK(!t.same_bytes(d.outputs.at(n)));
    }
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
  // Two stages' bases and mutants (indexer.quant, indexer.topk): the exit codes and the first-divergence line need
  // a file of several stages, not the whole library, which the test above already runs (this one ran it again:
  // 3 min of the sanitizer suite).
  REQUIRE(run("selftest --write " + d + " --only '[qt]*'", &out) == 0);
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
