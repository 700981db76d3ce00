// JSON report of `dsa-check check` (everything: summary, problems, every result with all metrics).
#pragma once
#include <nlohmann/json.hpp>

#include "report/run_report.hpp"

namespace dsa::report {

nlohmann::json report_json(const RunReport& r);

}  // namespace dsa::report
