#include "report/json.hpp"

namespace dsa::report {

nlohmann::json report_json(const RunReport& r) {
  nlohmann::json j;
  j["tool"] = "dsa-check";
  j["version"] = DSA_VERSION;
  j["summary"] = {{"passed", r.passed()}, {"failed", r.failed()}, {"checks", r.results.size()},
                  {"expected_passed", r.passed_in("expected")}, {"expected_failed", r.failed_in("expected")},
                  {"problems", r.problems.size()}, {"exit_code", r.exit_code()}};
  j["problems"] = r.problems;
  j["first_divergence"] = r.divergences;
  nlohmann::json res = nlohmann::json::array();
  for (const auto& c : r.results) res.push_back(cmp::to_json(c));
  j["results"] = res;
  return j;
}

}  // namespace dsa::report
