#include "report/run_report.hpp"

#include <algorithm>

namespace dsa::report {

std::int64_t RunReport::passed() const {
  return std::count_if(results.begin(), results.end(), [](const cmp::CheckResult& c) { return c.pass(); });
}
std::int64_t RunReport::failed() const { return static_cast<std::int64_t>(results.size()) - passed(); }
int RunReport::exit_code() const {
  if (!problems.empty()) return 2;
  for (const auto& c : results)
    if (c.verdict == cmp::Verdict::ERROR) return 2;
  return failed() ? 1 : 0;
}

}  // namespace dsa::report
