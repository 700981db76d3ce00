#include "report/run_report.hpp"

#include <algorithm>

namespace dsa::report {

std::int64_t RunReport::passed() const {
  return std::count_if(results.begin(), results.end(), [](const cmp::CheckResult& c) { return !c.informational && c.pass(); });
}
std::int64_t RunReport::failed() const {
  return std::count_if(results.begin(), results.end(), [](const cmp::CheckResult& c) { return !c.pass(); });
}
int RunReport::exit_code() const {
  if (!problems.empty()) return 2;
  for (const auto& c : results)
    if (c.verdict == cmp::Verdict::ERROR && !c.informational) return 2;
  return failed() ? 1 : 0;
}

}  // namespace dsa::report
