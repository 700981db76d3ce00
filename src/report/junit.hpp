// JUnit XML report of `dsa-check check`: one <testsuite> per file, one <testcase> per case x tensor
// (classname = stage.case, name = group/tensor); failing verdicts carry <failure type=VERDICT message=...>, check
// errors <error>, I/O and schema problems one <testcase name="load"> with an <error> each.
#pragma once
#include <string>

#include "report/run_report.hpp"

namespace dsa::report {

std::string junit_xml(const RunReport& r);
std::string xml_escape(const std::string& s);  // attribute/text safe; control characters other than \t\n\r dropped

}  // namespace dsa::report
