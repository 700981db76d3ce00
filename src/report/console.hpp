// Console report of `dsa-check check`: one line per case x tensor, final line exactly "N passed, M failed".
#pragma once
#include <ostream>

#include "report/run_report.hpp"

namespace dsa::report {

void print_console(const RunReport& r, std::ostream& out, bool quiet, int verbose, bool color);
// One result as a console line (no colour, no newline).
std::string console_line(const cmp::CheckResult& r);

}  // namespace dsa::report
