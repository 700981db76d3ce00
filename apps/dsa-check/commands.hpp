// The list of dsa-check subcommands. A subcommand = one `add_<name>(CLI::App&, int& rc)` function (in
// main.cpp or its own apps/dsa-check/cmd_<name>.cpp) listed in commands().
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "io/text_file.hpp"
#include "stage/stage.hpp"
#include "tensor/case.hpp"

namespace dsa::cli {

using AddCommand = void (*)(CLI::App&, int& rc);
void add_stages(CLI::App& app, int& rc);
void add_inspect(CLI::App& app, int& rc);
void add_validate(CLI::App& app, int& rc);
void add_golden(CLI::App& app, int& rc);
void add_check(CLI::App& app, int& rc);     // cmd_check.cpp
void add_merge(CLI::App& app, int& rc);     // cmd_check.cpp
void add_report(CLI::App& app, int& rc);    // cmd_check.cpp
void add_selftest(CLI::App& app, int& rc);  // cmd_selftest.cpp
void add_cut(CLI::App& app, int& rc);       // cmd_cut.cpp
void add_backend_diff(CLI::App& app, int& rc);  // cmd_backend_diff.cpp
void add_expect(CLI::App& app, int& rc);    // cmd_expect.cpp
void add_import(CLI::App& app, int& rc);    // cmd_import.cpp

// Problems of an output HDF5 path (`--out` of cut / expect): the same file as an input, a missing directory, a
// directory, anything io::resolve_output refuses or would write through (a FIFO or device). Empty = writable.
std::vector<Problem> output_file_problems(const std::string& out, const std::vector<std::string>& inputs);

inline const std::vector<AddCommand>& commands() {
  static const std::vector<AddCommand> all{add_stages, add_inspect, add_validate, add_golden, add_check, add_merge, add_report, add_selftest, add_cut, add_backend_diff, add_expect, add_import};
  return all;
}

// `--backend cpu|cuda` (check, golden, expect, selftest): where the references run; every backend gives the same bytes.
inline CLI::Option* add_backend_option(CLI::App* cmd, std::string& name) {
  return cmd->add_option("--backend", name, "where the references run: cpu (default) or cuda (same bytes; stages without a CUDA "
                                            "implementation are an error)")
      ->check(CLI::IsMember(backend_names()));
}
// The Backend named by `name`; false (the reason on stderr) when cuda is asked for and cannot run here.
inline bool resolve_backend(const std::string& name, Backend& b) {
  b = parse_backend(name).value_or(Backend::cpu);  // the option's check admits backend_names() only
  if (b == Backend::cuda) {
    if (const std::string e = cuda::device_problem(); !e.empty()) {
      std::cerr << "error: --backend cuda: " << e << "\n";
      return false;
    }
    cuda::warm_up();  // the context is created while the files are read
  }
  return true;
}

// Writes JSON to path via temp + rename (never onto one of `inputs`); returns 0, or 2 with a message on stderr.
inline int write_json_atomic(const std::string& path, const nlohmann::json& j, const std::vector<std::string>& inputs) {
  if (auto e = io::write_text_atomic(path, io::json_text(j), inputs); !e.empty()) {
    std::cerr << "error: " << e << "\n";
    return 2;
  }
  return 0;
}

}  // namespace dsa::cli
