// The result of a check run, as every report writer (console, JSON, JUnit) reads it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "compare/compare.hpp"

namespace dsa::report {

// The first note of an end-to-end result (a layer's chained check, pipeline/layer.hpp) whose chained inputs equal
// the stored ones: the same check as the local one, which the console and HTML reports show once.
inline constexpr const char* kEndToEndIsLocal = "end-to-end = local";

struct RunReport {
  std::vector<cmp::CheckResult> results;   // one per case x tensor (+ determinism checks), in file/case order
  std::vector<std::string> problems;       // I/O, schema and usage problems, one line each
  std::vector<std::string> divergences;    // first-divergence lines
  std::int64_t passed() const;
  std::int64_t failed() const;             // failing verdicts including ERROR
  int exit_code() const;
};

}  // namespace dsa::report
