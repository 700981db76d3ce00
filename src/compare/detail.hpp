// Helpers shared by the comparators (internal to src/compare).
#pragma once
#include <cstdio>
#include <string>

#include "compare/compare.hpp"

namespace dsa::cmp::detail {

inline std::string describe(const RefTensor& ref, std::int64_t flat) {
  if (ref.describe) return ref.describe(flat);
  return "element " + std::to_string(flat);
}

// Short number formatting for messages: %.6g.
inline std::string fmt(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

inline std::string loc_str(const Location& l) {
  return l.where + " (out " + fmt(l.out) + ", ref " + fmt(l.ref) + ")";
}

}  // namespace dsa::cmp::detail
