// The result of a check run, as every report writer (console, JSON, JUnit) reads it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compare/compare.hpp"

namespace dsa::report {

// The first note of an end-to-end result (a layer's chained check, pipeline/layer.hpp) whose chained inputs equal
// the stored ones: the same check as the local one, which the console and HTML reports show once.
inline constexpr const char* kEndToEndIsLocal = "end-to-end = local";

// The layers among a run's results (results with `layer`): per (file, layer) in order of appearance, the cases in
// layer_pos order, each with the indices of its local and its end-to-end (informational) results.
struct LayerStage {
  std::string stage, case_name;
  std::vector<std::size_t> local, e2e;
};
struct LayerView {
  std::string file, layer;
  std::map<std::int64_t, LayerStage> stages;  // by layer_pos
};
std::vector<LayerView> layer_views(const std::vector<cmp::CheckResult>& results);

struct RunReport {
  std::vector<cmp::CheckResult> results;   // one per case x tensor (+ determinism checks), in file/case order
  std::vector<std::string> problems;       // I/O, schema and usage problems, one line each
  std::vector<std::string> divergences;    // first-divergence lines
  std::int64_t passed() const;
  std::int64_t failed() const;             // failing verdicts including ERROR
  // The same counts over the results of one group only ("expected": the golden's own expected/ re-checked against
  // the reference, a self-check of the file, not a kernel's output).
  std::int64_t passed_in(const std::string& group) const;
  std::int64_t failed_in(const std::string& group) const;
  int exit_code() const;
};

}  // namespace dsa::report
