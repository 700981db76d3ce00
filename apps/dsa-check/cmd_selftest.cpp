// `dsa-check selftest`: CLI wiring only (logic in src/pipeline/selftest.cpp).
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "pipeline/selftest.hpp"

namespace dsa::cli {

void add_selftest(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("selftest",
                                 "Check plausible kernel outputs (must pass) and mutants modelled on real DSA bugs (must fail); "
                                 "prints the mutation score, exit 1 below 100 %");
  auto o = std::make_shared<selftest::SelftestOptions>();
  cmd->add_option("--seed", o->seed, "seed of the generated cases");
  cmd->add_flag("-v,--verbose", o->verbose, "print every check's message");
  cmd->add_flag("--allow-skip", o->allow_skip, "skip stages whose reference is unavailable instead of failing");
  cmd->add_option("--write", o->write_dir, "also write selftest_pass.h5 and selftest_mutants.h5 into this directory");
  cmd->add_option("--only", o->only, "only base cases / mutants whose name matches this glob");
  auto backend = std::make_shared<std::string>("cpu");
  add_backend_option(cmd, *backend);
  cmd->callback([o, backend, &rc] {
    if (!resolve_backend(*backend, o->backend)) {
      rc = 2;
      return;
    }
    try {
      const auto s = selftest::run_selftest(*o, std::cout);
      rc = selftest::selftest_exit_code(s, *o);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
    }
  });
}

}  // namespace dsa::cli
