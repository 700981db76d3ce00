// `dsa-check backend-diff FILE...`: CLI wiring only (logic in src/pipeline/backend_diff.cpp).
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "pipeline/backend_diff.hpp"

namespace dsa::cli {

void add_backend_diff(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "backend-diff",
      "Run every case's reference on two implementations and demand identical bytes (values, bounds, masks, emulations, "
      "top-k bands); exit 1 on any difference");
  auto files = std::make_shared<std::vector<std::string>>();
  auto a = std::make_shared<std::string>("cpu:1");
  auto b = std::make_shared<std::string>("cpu");
  cmd->add_option("files", *files, "HDF5 dump files (inputs/ are enough)")->required();
  cmd->add_option("--a", *a, "first implementation: cpu[:THREADS] or cuda (default cpu:1)");
  cmd->add_option("--b", *b, "second implementation: cpu[:THREADS] or cuda (default cpu, all threads)");
  cmd->callback([files, a, b, &rc] {
    pipeline::BackendDiffOptions o;
    o.files = *files;
    try {
      o.a = pipeline::parse_impl(*a);
      o.b = pipeline::parse_impl(*b);
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
      return;
    }
    rc = pipeline::run_backend_diff(o, std::cout, std::cerr);
  });
}

}  // namespace dsa::cli
