// `dsa-check cut FILE --case PATTERN... --out OUT`: copy selected cases (glob patterns on case names) into a
// new, standalone schema-v1 file. The selected cases are validated first; any problem -> exit 2, one line per
// problem, and no output file. The output is written by io::write_file (temp file + rename): tensors keep their
// exact bits, attrs their values (stage defaults are not added).
#include <fnmatch.h>

#include <filesystem>
#include <iostream>
#include <set>

#include "apps/dsa-check/commands.hpp"
#include "io/paths.hpp"
#include "pipeline/load.hpp"

namespace dsa::cli {

std::vector<Problem> output_file_problems(const std::string& out, const std::vector<std::string>& inputs) {
  std::vector<Problem> problems;
  std::error_code ec;
  for (const auto& file : inputs)
    if (std::filesystem::exists(out, ec) && std::filesystem::exists(file, ec) && std::filesystem::equivalent(file, out, ec))
      problems.push_back({out, "", "--out", "a path other than the input file", "the input file itself"});
  const std::filesystem::path op(out);
  const std::filesystem::path odir = op.has_parent_path() ? op.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(odir, ec))
    problems.push_back({out, "", "--out", "a file in an existing directory", "no directory " + odir.string()});
  else if (std::filesystem::is_directory(op, ec))
    problems.push_back({out, "", "--out", "a file path", "a directory"});
  io::OutputTarget target;
  if (problems.empty())
    if (auto e = io::resolve_output(out, inputs, target); !e.empty() || target.direct)
      problems.push_back({out, "", "--out", "a regular file or a new name", e.empty() ? "a FIFO or device" : e});
  return problems;
}

namespace {

int run_cut(const std::string& file, const std::vector<std::string>& patterns, const std::string& out) {
  std::vector<Problem> problems = output_file_problems(out, {file});

  io::ReadOptions opt = pipeline::read_options();
  opt.apply_defaults = false;  // copy attrs exactly as stored; validation still applies the defaults
  io::ReadResult r = io::read_file(file, opt);
  std::set<std::string> selected;
  for (const auto& pat : patterns) {
    bool any = false;
    for (const Case& c : r.cases)
      if (fnmatch(pat.c_str(), c.name.c_str(), 0) == 0) {
        selected.insert(c.name);
        any = true;
      }
    // A file that did not open has no cases: its own problem says why, do not add one per pattern.
    if (!any && !r.cases.empty()) {
      std::string names;
      for (const Case& c : r.cases) names += (names.empty() ? "" : ", ") + c.name;
      problems.push_back({file, "", "--case '" + pat + "'", "a pattern matching a case (" + names + ")", "no match"});
    }
  }
  for (const auto& p : r.problems) {
    // File-level problems that stopped the read (no case), and every problem of a selected case.
    if ((p.case_name.empty() && r.cases.empty()) || selected.count(p.case_name)) problems.push_back(p);
  }
  if (!problems.empty()) {
    for (const auto& p : problems) std::cerr << "error: " << p.str() << "\n";
    std::cerr << "cut: " << problems.size() << " problem(s); nothing written\n";
    return 2;
  }
  std::vector<Case> cases;
  for (Case& c : r.cases)
    if (selected.count(c.name)) cases.push_back(std::move(c));
  try {
    io::write_file(out, cases, {file});
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  std::cout << "cut: wrote " << cases.size() << " case(s) to " << out << ":";
  for (const Case& c : cases) std::cout << " " << c.name;
  std::cout << "\n";
  return 0;
}

}  // namespace

void add_cut(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("cut", "Copy selected cases of a dump (glob patterns on case names) into a small standalone file");
  auto file = std::make_shared<std::string>();
  auto patterns = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>();
  cmd->add_option("file", *file, "HDF5 dump file")->required();
  cmd->add_option("--case", *patterns, "case name glob pattern(s), e.g. 'paged_*'")->required()->expected(1, -1);
  cmd->add_option("--out", *out, "output HDF5 file (written atomically; never partial)")->required();
  cmd->callback([file, patterns, out, &rc] { rc = run_cut(*file, *patterns, *out); });
}

}  // namespace dsa::cli
