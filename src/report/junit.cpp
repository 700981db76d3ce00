#include "report/junit.hpp"

#include <map>
#include <sstream>

namespace dsa::report {

std::string xml_escape(const std::string& raw) {
  const std::string s = printable(raw);  // control characters and invalid UTF-8 as \xNN (well-formed XML)
  std::string o;
  o.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      case '\n': o += "&#10;"; break;
      case '\r': o += "&#13;"; break;
      case '\t': o += "&#9;"; break;
      default:
        if (static_cast<unsigned char>(ch) >= 0x20) o += ch;
    }
  }
  return o;
}

std::string junit_xml(const RunReport& r) {
  // Group by file, keeping first-seen order.
  std::vector<std::string> files;
  std::map<std::string, std::vector<const cmp::CheckResult*>> by;
  for (const auto& c : r.results) {
    if (!by.count(c.file)) files.push_back(c.file);
    by[c.file].push_back(&c);
  }
  std::int64_t errors = static_cast<std::int64_t>(r.problems.size()), failures = 0;
  for (const auto& c : r.results) (c.verdict == cmp::Verdict::ERROR ? errors : failures) += c.pass() ? 0 : 1;
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"dsa-check\" tests=\"" << r.results.size() + r.problems.size() << "\" failures=\"" << failures
    << "\" errors=\"" << errors << "\">\n";
  for (const auto& f : files) {
    const auto& v = by[f];
    std::int64_t fail = 0, err = 0;
    for (const auto* c : v) (c->verdict == cmp::Verdict::ERROR ? err : fail) += c->pass() ? 0 : 1;
    x << "  <testsuite name=\"" << xml_escape(f.empty() ? "(memory)" : f) << "\" tests=\"" << v.size() << "\" failures=\""
      << fail << "\" errors=\"" << err << "\">\n";
    for (const auto* c : v) {
      x << "    <testcase classname=\"" << xml_escape(c->stage + "." + c->case_name) << "\" name=\""
        << xml_escape(c->group + "/" + c->tensor) << "\" time=\"0\"";
      if (c->pass()) {
        x << ">\n      <system-out>" << xml_escape(std::string(cmp::verdict_name(c->verdict)) + ": " + c->message)
          << "</system-out>\n    </testcase>\n";
        continue;
      }
      const char* tag = c->verdict == cmp::Verdict::ERROR ? "error" : "failure";
      std::string body;
      for (const auto& n : c->notes) body += n + "\n";
      if (c->topk)
        for (const auto& e : c->topk->examples) body += e + "\n";
      x << ">\n      <" << tag << " type=\"" << cmp::verdict_name(c->verdict) << "\" message=\"" << xml_escape(c->message)
        << "\">" << xml_escape(body) << "</" << tag << ">\n    </testcase>\n";
    }
    x << "  </testsuite>\n";
  }
  if (!r.problems.empty()) {
    x << "  <testsuite name=\"load\" tests=\"" << r.problems.size() << "\" failures=\"0\" errors=\"" << r.problems.size()
      << "\">\n";
    for (std::size_t i = 0; i < r.problems.size(); ++i)
      x << "    <testcase classname=\"dsa-check.load\" name=\"problem " << i << "\" time=\"0\">\n      <error type=\"IO_OR_SCHEMA\" message=\""
        << xml_escape(r.problems[i]) << "\"/>\n    </testcase>\n";
    x << "  </testsuite>\n";
  }
  x << "</testsuites>\n";
  return x.str();
}

}  // namespace dsa::report
