#include "selftest/selftest.hpp"

#include <fnmatch.h>

#include <cstdio>
#include <filesystem>

#include "compare/compare.hpp"
#include "io/h5io.hpp"
#include "selftest/mutants.hpp"
#include "stages/registry.hpp"

namespace dsa::selftest {
namespace {

std::string verdicts(const std::vector<cmp::CheckResult>& rs) {
  std::string s;
  for (const auto& r : rs) s += (s.empty() ? "" : ", ") + r.tensor + "=" + std::string(cmp::verdict_name(r.verdict));
  return s;
}
bool matches(const std::string& glob, const std::string& name) {
  return glob.empty() || ::fnmatch(glob.c_str(), name.c_str(), 0) == 0;
}

}  // namespace

SelftestSummary run_selftest(const SelftestOptions& o, std::ostream& out) {
  SelftestSummary s;
  std::vector<Case> pass_cases, mutant_cases;
  for (Case c : base_cases(o.seed)) {
    bool any = matches(o.only, c.name);
    for (const auto& m : mutants()) any = any || (m.base == c.name && matches(o.only, m.name));
    if (!any) continue;
    Expected E;
    try {
      for (const auto& p : validate_case(c, false)) throw std::runtime_error("invalid base case: " + p.str());
      E = run_reference(c, cmp::reference_options(c, {}));
      plausible_outputs(c, E, o.seed);
    } catch (const std::exception& e) {
      int n = 0;
      for (const auto& m : mutants()) n += m.base == c.name ? 1 : 0;
      s.skipped += n + 1;
      out << "SKIP     base '" << c.name << "' (" << c.stage << ") and its " << n << " mutant(s): " << e.what() << "\n";
      continue;
    }
    ++s.base_total;
    const auto res = cmp::check_case(c, {}, E);
    bool ok = !res.empty();
    for (const auto& r : res) ok = ok && r.pass();
    s.base_pass += ok ? 1 : 0;
    out << (ok ? "PASS     " : "FAIL     ") << "base '" << c.name << "' (" << c.stage << "): " << verdicts(res) << "\n";
    if (!ok || o.verbose)
      for (const auto& r : res) out << "         " << r.tensor << ": " << r.message << "\n";
    pass_cases.push_back(c);
    for (const auto& m : mutants()) {
      if (m.base != c.name || !matches(o.only, m.name)) continue;
      ++s.mutants_total;
      Case mc = c;
      mc.name = m.name;
      mc.attrs["mutant_bug"] = m.bug;
      for (auto& [n, t] : mc.outputs) t = t.clone();
      std::vector<cmp::CheckResult> mr;
      std::string err;
      try {
        m.apply(mc, E, o.seed * 1000003u + static_cast<std::uint64_t>(s.mutants_total));
        mr = cmp::check_case(mc, {});
      } catch (const std::exception& e) {
        err = e.what();
      }
      bool killed = false, error = !err.empty();
      const cmp::CheckResult* hit = nullptr;
      for (const auto& r : mr) {
        error = error || r.verdict == cmp::Verdict::ERROR;
        for (auto v : m.expect)
          if (r.verdict == v && !hit) hit = &r;
      }
      killed = hit && !error;
      s.killed += killed ? 1 : 0;
      if (!killed) s.survivors.push_back(m.name);
      std::string want;
      for (auto v : m.expect) want += (want.empty() ? "" : "|") + std::string(cmp::verdict_name(v));
      out << (killed ? "KILLED   " : "SURVIVED ") << m.name << " [" << m.bug << "] expect " << want << ": "
          << (err.empty() ? verdicts(mr) : "error: " + err) << "\n";
      if (hit && (o.verbose || !killed)) out << "         " << hit->tensor << ": " << hit->message << "\n";
      else if (!killed)
        for (const auto& r : mr) out << "         " << r.tensor << ": " << r.message << "\n";
      mutant_cases.push_back(std::move(mc));
    }
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f", 100.0 * s.score());
  out << "base cases: " << s.base_pass << "/" << s.base_total << " pass\n";
  out << "mutation score: " << s.killed << "/" << s.mutants_total << " (" << pct << " %)";
  if (s.skipped) out << "; " << s.skipped << " skipped (reference unavailable)";
  out << "\n";
  if (!o.write_dir.empty()) {
    std::filesystem::create_directories(o.write_dir);
    io::write_file((std::filesystem::path(o.write_dir) / "selftest_pass.h5").string(), pass_cases);
    io::write_file((std::filesystem::path(o.write_dir) / "selftest_mutants.h5").string(), mutant_cases);
    out << "wrote " << o.write_dir << "/selftest_pass.h5 (" << pass_cases.size() << " cases), selftest_mutants.h5 ("
        << mutant_cases.size() << " cases)\n";
  }
  return s;
}

int selftest_exit_code(const SelftestSummary& s, const SelftestOptions& o) {
  if (s.base_pass != s.base_total || s.killed != s.mutants_total) return 1;
  if (s.skipped && !o.allow_skip) return 1;
  if (s.base_total == 0) return 1;
  return 0;
}

}  // namespace dsa::selftest
