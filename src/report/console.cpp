#include "report/console.hpp"

#include <iomanip>
#include <sstream>

#include "compare/detail.hpp"

namespace dsa::report {

std::string console_line(const cmp::CheckResult& r) {
  std::ostringstream o;
  // A layer's results are indented under its header; end-to-end ones (informational) carry "e2e" before the verdict.
  if (!r.layer.empty()) o << "  ";
  o << std::left << std::setw(14) << (std::string(r.informational ? "e2e " : "") + std::string(cmp::verdict_name(r.verdict))) << ' '
    << r.case_name << '/' << r.group << '/' << r.tensor << "  [" << r.stage << "]  " << r.message;
  return printable(o.str());
}

void print_console(const RunReport& r, std::ostream& out, bool quiet, int verbose, bool color) {
  const char* green = color ? "\033[32m" : "";
  const char* red = color ? "\033[31m" : "";
  const char* yellow = color ? "\033[33m" : "";
  const char* reset = color ? "\033[0m" : "";
  std::string cur_layer;  // "file\nlayer" of the block being printed
  for (const auto& res : r.results) {
    const std::string lk = res.layer.empty() ? "" : res.file + "\n" + res.layer;
    if (lk != cur_layer && !lk.empty()) {
      std::string stages;  // the layer's stages in pipeline order
      std::int64_t last = -1;
      for (const auto& x : r.results)
        if (x.file == res.file && x.layer == res.layer && x.layer_pos != last) {
          stages += (stages.empty() ? "" : " -> ") + x.stage;
          last = x.layer_pos;
        }
      out << "layer " << printable(res.layer) << " (" << printable(res.file) << "): " << stages << "\n";
    }
    cur_layer = lk;
    if (quiet && res.pass()) continue;
    // An end-to-end result the chain did not change (the case got its stored inputs) repeats the local line: -v only.
    if (res.informational && verbose == 0 && !res.notes.empty() && res.notes.front().rfind(kEndToEndIsLocal, 0) == 0) continue;
    const bool drift = res.informational && !cmp::verdict_pass(res.verdict);
    const char* c = drift ? yellow : res.pass() ? green : (res.verdict == cmp::Verdict::ERROR ? yellow : red);
    const std::string line = console_line(res);
    const auto vlen = (res.layer.empty() ? 0 : 2) + (res.informational ? 4 : 0) + cmp::verdict_name(res.verdict).size();
    out << c << line.substr(0, vlen) << reset << line.substr(vlen) << (drift ? "  (informational: drift along the chain)" : "") << "\n";
    if (verbose > 0) {
      if (!res.file.empty()) out << "    file " << printable(res.file) << "\n";
      if (res.first) out << "    first: " << printable(cmp::detail::loc_str(*res.first)) << "\n";
      if (res.worst) out << "    worst: " << printable(cmp::detail::loc_str(*res.worst)) << "\n";
      if (res.bounded) {
        const auto& s = *res.bounded;
        out << "    compared " << s.compared << "  max abs " << cmp::detail::fmt(s.max_abs) << "  max rel "
            << cmp::detail::fmt(s.max_rel) << "  max err/M " << cmp::detail::fmt(s.max_err_over_m) << "  max ulp(" << s.ulp_bits
            << "-bit, over the " << s.ulp_compared << " with |ref| > bound) " << cmp::detail::fmt(s.max_ulp) << "  cosine " << cmp::detail::fmt(s.cosine) << "  calc_diff "
            << cmp::detail::fmt(s.calc_diff) << "  rel<0.1% " << cmp::detail::fmt(s.ratio_rel_1e3) << "  rel<0.5% "
            << cmp::detail::fmt(s.ratio_rel_5e3) << "  min rtol " << cmp::detail::fmt(s.min_rtol) << "\n";
      }
      if (res.topk) {
        const auto& s = *res.topk;
        out << "    rows " << s.rows << "  recall@k " << cmp::detail::fmt(s.recall) << "  jaccard " << cmp::detail::fmt(s.jaccard)
            << "  band " << s.band << "  swaps " << s.swaps << "  hard misses " << s.hard_misses << "  extras " << s.hard_extras << "\n";
        for (const auto& e : s.examples) out << "    " << printable(e) << "\n";
      }
      if (!res.emulation.empty()) out << "    emulation " << res.emulation << ": " << res.emulation_mismatches << " element(s) differ\n";
      for (const auto& n : res.notes) out << "    note: " << printable(n) << "\n";
    }
  }
  for (const auto& d : r.divergences) out << printable(d) << "\n";
  out << r.passed() << " passed, " << r.failed() << " failed";
  // The golden's own expected/ re-checked is a self-check of the file, not a kernel's output: counted apart.
  if (const std::int64_t ep = r.passed_in("expected"), ef = r.failed_in("expected"); ep + ef > 0)
    out << ": kernel outputs " << r.passed() - ep << " passed, " << r.failed() - ef << " failed; the files' expected/ (reference self-check) "
        << ep << " passed, " << ef << " failed";
  out << "\n";
  if (!r.problems.empty())
    out << r.problems.size() << " input problem(s) reported on stderr: the cases they name were not checked (exit 2)\n";
}

}  // namespace dsa::report
