// `dsa-check expect IN.h5 --out OUT.h5 [--case PATTERN...] [-j N]`: golden data from the user's own activations. Every
// selected case of IN (inputs captured from an engine, e.g. by the Python kit) gets expected/ = the stage reference
// of its inputs (outputs/ kept: the file then carries the kernel's result beside the reference); attrs are copied as
// stored, plus `expected_by`. Any invalid case -> exit 2, one line per problem, nothing written. OUT is written by
// io::write_file (temp file + rename; never over IN, never over something that is not a regular file).
#include <fnmatch.h>

#include <iostream>
#include <set>

#include "apps/dsa-check/commands.hpp"
#include "pipeline/load.hpp"
#include "stage/stage.hpp"

namespace dsa::cli {

namespace {

int run_expect(const std::string& file, const std::vector<std::string>& patterns, const std::string& out, int threads, Backend backend) {
  std::vector<Problem> problems = output_file_problems(out, {file});
  io::ReadOptions opt = pipeline::read_options();
  opt.apply_defaults = false;  // attrs stay as stored; validation and the reference see the declared defaults
  io::ReadResult r = io::read_file(file, opt);
  for (const auto& p : r.problems) problems.push_back(p);
  std::vector<Case> cases;
  for (Case& c : r.cases) {
    bool take = patterns.empty();
    for (const auto& pat : patterns) take = take || fnmatch(pat.c_str(), c.name.c_str(), 0) == 0;
    if (take) cases.push_back(std::move(c));
  }
  if (cases.empty() && problems.empty())
    problems.push_back({file, "", patterns.empty() ? "" : "--case", "at least one case", patterns.empty() ? "none in the file" : "no case matches"});
  if (!problems.empty()) {
    for (const auto& p : problems) std::cerr << "error: " << p.str() << "\n";
    std::cerr << "expect: " << problems.size() << " problem(s); nothing written\n";
    return 2;
  }
  RefOptions ro;
  ro.threads = threads;
  for (Case& c : cases) {
    BoundCase b;
    try {
      if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
      const Expected e = run_reference(b, ro, backend);
      c.expected.clear();
      for (const auto& t : e.tensors) c.expected[t.name] = t.value;
    } catch (const std::exception& ex) {
      std::cerr << "error: " << file << ": case '" << c.name << "': " << ex.what() << "\nexpect: nothing written\n";
      return 2;
    }
    c.attrs["expected_by"] = AttrValue{std::string("dsa-check ") + DSA_VERSION + " expect (the stage reference of inputs/)"};
  }
  try {
    io::write_file(out, cases, {file});
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  std::cout << "expect: wrote expected/ of " << cases.size() << " case(s) to " << out << ":";
  for (const Case& c : cases) std::cout << " " << c.name;
  std::cout << "\n";
  return 0;
}

}  // namespace

void add_expect(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand(
      "expect", "Fill expected/ of captured inputs with the reference (golden data from your own activations) into a new file");
  auto file = std::make_shared<std::string>();
  auto patterns = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  auto threads = std::make_shared<int>(0);
  cmd->add_option("file", *file, "HDF5 dump with inputs/ (never modified)")->required();
  cmd->add_option("--out", *out, "output HDF5 file (written atomically; never partial, never over the input)")->required();
  cmd->add_option("--case", *patterns, "only cases matching these glob patterns (default: all)");
  cmd->add_option("-j,--threads", *threads, "reference threads (default: all cores)")->check(CLI::NonNegativeNumber);
  auto backend = std::make_shared<std::string>("cpu");
  add_backend_option(cmd, *backend);
  cmd->callback([file, patterns, out, threads, backend, &rc] {
    Backend b;
    rc = resolve_backend(*backend, b) ? run_expect(*file, *patterns, *out, *threads, b) : 2;
  });
}

}  // namespace dsa::cli
