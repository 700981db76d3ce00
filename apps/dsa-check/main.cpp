// dsa-check CLI: CLI11 wiring only. Each subcommand's logic lives in src/.
// Exit codes: 0 all pass, 1 some check failed, 2 usage / I/O / schema error.
#include <CLI/CLI.hpp>
#include <hdf5.h>
#include <fstream>
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "io/cleanup.hpp"
#include "pipeline/inspect.hpp"
#include "pipeline/load.hpp"
#include "stage/describe.hpp"

namespace dsa::cli {

void add_stages(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("stages", "List the registered DSA stages with their dump schema");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "machine-readable schema (what the Python kit reads)");
  cmd->callback([json, &rc] {
    if (*json) std::cout << stages_json().dump(2) << "\n";
    else print_stages_text(std::cout);
    rc = 0;
  });
}

void add_inspect(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("inspect", "Show cases, tensors (shape, dtype, min/max/mean, NaN/inf) and schema validation");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<std::string>();
  cmd->add_option("files", *files, "HDF5 dump files")->required();
  cmd->add_option("--json", *json, "also write the inspection as JSON to this file");
  cmd->callback([files, json, &rc] {
    nlohmann::json j;
    rc = run_inspect(*files, std::cout, std::cerr, json->empty() ? nullptr : &j);
    if (!json->empty()) rc = std::max(rc, write_json_atomic(*json, j, *files));
  });
}

void add_validate(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "validate", "Validate dumps against the stage table (schema and each stage's value rules), as check reads them; "
                  "exit 0 when valid, 2 otherwise");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("files", *files, "HDF5 dump files")->required();
  cmd->add_flag("--json", *json, "print the problems as a JSON array of {file, case, tensor, expected, found}");
  cmd->callback([files, json, &rc] {
    nlohmann::json all = nlohmann::json::array();
    rc = 0;
    for (const auto& f : *files) {
      const io::ReadResult r = pipeline::load_file(f);
      for (const auto& p : r.problems) {
        if (*json) all.push_back({{"file", p.file}, {"case", p.case_name}, {"tensor", p.tensor}, {"expected", p.expected}, {"found", p.found}});
        else std::cerr << "error: " << p.str() << "\n";
      }
      if (!r.ok()) rc = 2;
      else if (!*json) std::cout << f << ": valid (" << r.cases.size() << " case(s))\n";
    }
    if (*json) std::cout << io::json_text(all) << "\n";
  });
}

}  // namespace dsa::cli

int main(int argc, char** argv) {
  // HDF5 1.10 crashes in its atexit handler (H5F__close_cb) when a file whose flush or close failed (a full disk) is
  // still open; every file we write is closed before its rename and every read-only handle by RAII, so skip it.
  H5dont_atexit();
  dsa::io::install_signal_cleanup();  // SIGINT/SIGTERM: remove in-flight temp files, then die of the signal
  CLI::App app{"dsa-check: reference simulator and validator for DeepSeek Sparse Attention kernels"};
  app.set_version_flag("--version", std::string("dsa-check ") + DSA_VERSION);
  app.require_subcommand(1);
  int rc = 0;
  for (const auto& add : dsa::cli::commands()) add(app, rc);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return rc;
}
