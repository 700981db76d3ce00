// dsa-check CLI: CLI11 wiring only. Each subcommand's logic lives in src/.
// Exit codes: 0 all pass, 1 some check failed, 2 usage / I/O / schema error.
#include <CLI/CLI.hpp>
#include <hdf5.h>

#include <algorithm>
#include <fstream>
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "io/cleanup.hpp"
#include "pipeline/inspect.hpp"
#include "pipeline/load.hpp"
#include "schema/schema.hpp"
#include "stage/describe.hpp"

namespace dsa::cli {

void add_stages(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("stages", "List the registered DSA stages with their dump schema (all, or the named ones with what they compute)");
  auto json = std::make_shared<bool>(false);
  auto names = std::make_shared<std::vector<std::string>>();
  cmd->add_option("names", *names, "stage names (e.g. indexer.logits_ragged): only these, with their formula");
  cmd->add_flag("--json", *json, "machine-readable schema (what the Python kit reads)");
  cmd->callback([json, names, &rc] {
    std::vector<std::string> known;
    for (const Stage& s : stages()) known.push_back(s.name);
    for (const auto& n : *names)
      if (std::find(known.begin(), known.end(), n) == known.end()) {
        const std::string near = closest_name(n, known);
        std::string all;
        for (const auto& k : known) all += (all.empty() ? "" : ", ") + k;
        std::cerr << "error: stages: unknown stage '" << n << "'" << (near.empty() ? "" : " (did you mean " + near + "?)")
                  << "; known stages: " << all << "\n";
        rc = 2;
        return;
      }
    if (*json) {
      nlohmann::json j = stages_json();
      if (!names->empty()) {
        nlohmann::json keep = nlohmann::json::array();
        for (const auto& st : j["stages"])
          if (std::find(names->begin(), names->end(), st["name"].get<std::string>()) != names->end()) keep.push_back(st);
        j["stages"] = keep;
      }
      std::cout << j.dump(2) << "\n";
    } else {
      print_stages_text(std::cout, *names);
    }
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
#ifdef DSA_CUDA_BACKEND
  const char* backends = "backends: cpu, cuda (CUDA runtime linked statically: runs without a GPU; --backend cuda needs one)";
#else
  const char* backends = "backends: cpu (built without CUDA: --backend cuda needs a from-source build with nvcc)";
#endif
#ifdef DSA_DISTRIBUTION
  const std::string dist = std::string(" (") + DSA_DISTRIBUTION + ")";
#else
  const std::string dist;
#endif
#ifdef DSA_STATIC_DEPS
  unsigned h5maj = 0, h5min = 0, h5rel = 0;
  H5get_libversion(&h5maj, &h5min, &h5rel);
  const std::string linked = "; HDF5 " + std::to_string(h5maj) + "." + std::to_string(h5min) + "." + std::to_string(h5rel) +
                             " linked in (no libhdf5 needed)";
#else
  const std::string linked;
#endif
  app.set_version_flag("--version", std::string("dsa-check ") + DSA_VERSION + dist + "; " + backends + linked);
  app.require_subcommand(1);
  int rc = 0;
  for (const auto& add : dsa::cli::commands()) add(app, rc);
  // One example per subcommand, shown by its --help (and the top-level help's).
  static const std::pair<const char*, const char*> kExamples[] = {
      {"stages", "dsa-check stages indexer.logits_ragged     (dsa-check stages --json: the whole schema)"},
      {"inspect", "dsa-check inspect dump.h5"},
      {"validate", "dsa-check validate dump.h5"},
      {"golden", "dsa-check golden --demo --out goldens/     (dsa-check golden --list: the catalogue)"},
      {"check", "dsa-check check dump.h5 --json r.json --junit r.xml --html r.html"},
      {"merge", "dsa-check merge shard0.json shard1.json --json all.json"},
      {"report", "dsa-check report r.json --html r.html"},
      {"selftest", "dsa-check selftest --write out/"},
      {"cut", "dsa-check cut dump.h5 --case 'decode_*' --out small.h5"},
      {"backend-diff", "dsa-check backend-diff golden/*.h5 --a cpu:1 --b cuda"},
      {"expect", "dsa-check expect captured.h5 --out golden_mine.h5"}};
  std::string names;
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    for (const auto& [n, ex] : kExamples)
      if (sub->get_name() == n) const_cast<CLI::App*>(sub)->footer(std::string("\nExample:\n  ") + ex);
  }
  app.footer("\nExample:\n  dsa-check golden --demo --out demo/ && dsa-check check demo/demo_fail.h5\n"
             "Each subcommand's --help shows its options and one example.");
  // An unknown first word is named, with the known subcommands (CLI11 alone would say "A subcommand is required", or
  // print the top-level help and exit 0 when --help follows it).
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::vector<std::string> known;
    for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; })) known.push_back(sub->get_name());
    if (std::find(known.begin(), known.end(), word) == known.end()) {
      const std::string near = dsa::closest_name(word, known);
      std::cerr << "error: unknown subcommand '" << word << "'" << (near.empty() ? "" : " (did you mean " + near + "?)")
                << "; known subcommands: " << names << "\nRun 'dsa-check --help' for more information.\n";
      return 2;
    }
  }
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
