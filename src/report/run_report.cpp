#include "report/run_report.hpp"

#include <algorithm>

namespace dsa::report {

std::vector<LayerView> layer_views(const std::vector<cmp::CheckResult>& results) {
  std::vector<LayerView> out;
  std::map<std::pair<std::string, std::string>, std::size_t> at;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.layer.empty()) continue;
    auto [it, fresh] = at.try_emplace({r.file, r.layer}, out.size());
    if (fresh) out.push_back({r.file, r.layer, {}});
    LayerStage& p = out[it->second].stages[r.layer_pos];
    p.stage = r.stage;
    p.case_name = r.case_name;
    (r.informational ? p.e2e : p.local).push_back(i);
  }
  return out;
}

namespace {
// A pass that counts: not informational (end to end), and not an across-call line that compared nothing.
bool counted_pass(const cmp::CheckResult& c) { return !c.informational && c.pass() && !(c.group == "consistency" && c.numel == 0); }
}  // namespace

std::int64_t RunReport::passed() const { return std::count_if(results.begin(), results.end(), counted_pass); }
std::int64_t RunReport::failed() const {
  return std::count_if(results.begin(), results.end(), [](const cmp::CheckResult& c) { return !c.pass(); });
}
std::int64_t RunReport::passed_in(const std::string& g) const {
  return std::count_if(results.begin(), results.end(), [&](const cmp::CheckResult& c) { return c.group == g && counted_pass(c); });
}
std::int64_t RunReport::failed_in(const std::string& g) const {
  return std::count_if(results.begin(), results.end(), [&](const cmp::CheckResult& c) { return c.group == g && !c.pass(); });
}
int RunReport::exit_code() const {
  if (!problems.empty()) return 2;
  for (const auto& c : results)
    if (c.verdict == cmp::Verdict::ERROR && !c.informational) return 2;
  return failed() ? 1 : 0;
}

}  // namespace dsa::report
