// `dsa-check selftest`: every stage's selftest cases (Stage::selftest, built by the stage's own generators) with
// plausible outputs must pass every check; every mutant (Stage::mutants) must be caught with its expected verdict. Prints the mutation score; exit 0 only when every base case passes and the
// score is 100 % (1 otherwise; a stage whose reference is unavailable counts as a failure unless allow_skip).
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::selftest {

struct SelftestOptions {
  std::uint64_t seed = 1;       // input seed of every base case, and of the plausible outputs and mutants
  int verbose = 0;
  bool allow_skip = false;     // stages whose reference throws are skipped instead of failing the run
  std::string write_dir;       // if set: selftest_pass.h5 (base cases + plausible outputs), selftest_mutants.h5
  std::string only;            // glob on mutant / base names ("" = all)
  Backend backend = Backend::cpu;  // where references run; stages without an implementation there are left out (named)
};

struct SelftestSummary {
  int base_total = 0, base_pass = 0, mutants_total = 0, killed = 0, skipped = 0;
  int other_backend = 0;  // base cases left out: their stage has no implementation on the chosen backend
  std::vector<std::string> survivors;  // mutant names not caught with the expected verdict
  int layers_run = 0;                  // layer goldens whose attribution was tested (pipeline/layers.hpp)
  bool layers_ok = true;               // every mutant placed in a layer attributed to its stage
  double score() const { return mutants_total ? static_cast<double>(killed) / mutants_total : 1.0; }
};

SelftestSummary run_selftest(const SelftestOptions& o, std::ostream& out);
int selftest_exit_code(const SelftestSummary& s, const SelftestOptions& o);

}  // namespace dsa::selftest
