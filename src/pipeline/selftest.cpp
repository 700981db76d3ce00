#include "pipeline/selftest.hpp"

#include <fnmatch.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "io/h5io.hpp"
#include "pipeline/check_case.hpp"
#include "pipeline/golden.hpp"
#include "pipeline/layers.hpp"
#include "stage/mutant_kit.hpp"

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
  pipeline::CheckOptions copt;
  copt.backend = o.backend;
  for (const Stage& st : stages())
    for (const golden::GoldenSpec& spec : st.selftest) {
      bool any = matches(o.only, spec.name);
      for (const auto& m : st.mutants) any = any || (m.base == spec.name && matches(o.only, m.name));
      if (!any) continue;
      if (!st.impl_for(o.backend)) {
        ++s.other_backend;
        if (o.verbose) out << "LEFT OUT base '" << spec.name << "' (" << st.name << "): no " << backend_name(o.backend) << " implementation\n";
        continue;
      }
      // The base case: the stage's own generator (as for goldens), plausible outputs of the reference `check` runs.
      Case c;
      Expected E;
      BoundCase b;
      try {
        c = golden::make_case(spec, o.seed, 0);
        c.expected.clear();
        if (auto p = validate_case(c, false, &b); !p.empty()) throw std::runtime_error("invalid base case: " + p.front().str());
        E = run_reference(b, pipeline::reference_options(b, copt), o.backend);
        mutant::plausible_outputs(c, E, o.seed);
      } catch (const std::exception& e) {
        int n = 0;
        for (const auto& m : st.mutants) n += m.base == spec.name ? 1 : 0;
        s.skipped += n + 1;
        out << "SKIP     base '" << spec.name << "' (" << st.name << ") and its " << n << " mutant(s): " << e.what() << "\n";
        continue;
      }
      ++s.base_total;
      b.c = &c;
      const auto res = pipeline::check_case(b, copt, E);
      bool ok = !res.empty();
      for (const auto& r : res) ok = ok && r.pass();
      s.base_pass += ok ? 1 : 0;
      out << (ok ? "PASS     " : "FAIL     ") << "base '" << c.name << "' (" << c.stage << "): " << verdicts(res) << "\n";
      if (!ok || o.verbose)
        for (const auto& r : res) out << "         " << r.tensor << ": " << r.message << "\n";
      pass_cases.push_back(c);
      for (const auto& m : st.mutants) {
        if (m.base != spec.name || !matches(o.only, m.name)) continue;
        ++s.mutants_total;
        Case mc = c;
        mc.name = m.name;
        mc.attrs["mutant_bug"] = m.bug;
        for (auto& [n, t] : mc.outputs) t = t.clone();
        std::vector<cmp::CheckResult> mr;
        std::string err;
        try {
          m.apply(mc, E, o.seed * 1000003u + static_cast<std::uint64_t>(s.mutants_total));
          mr = pipeline::check_case(mc, copt);
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
        // The hypothesis hints check gave must be exactly the mutant's diagnosis (none when it has none).
        std::set<std::string> named;
        for (const auto& r : mr)
          for (const auto& n : r.notes)
            if (auto pos = n.find(pipeline::kHypothesisMatch); pos != std::string::npos) named.insert(n.substr(0, pos));
        const std::set<std::string> want_named = m.diagnosis.empty() ? std::set<std::string>{} : std::set<std::string>{m.diagnosis};
        const bool diagnosed = named == want_named;
        killed = hit && !error && diagnosed;
        s.killed += killed ? 1 : 0;
        if (!killed) s.survivors.push_back(m.name);
        std::string want;
        for (auto v : m.expect) want += (want.empty() ? "" : "|") + std::string(cmp::verdict_name(v));
        out << (killed ? "KILLED   " : "SURVIVED ") << m.name << " [" << m.bug << "] expect " << want << ": "
            << (err.empty() ? verdicts(mr) : "error: " + err)
            << (m.diagnosis.empty() ? "" : ", diagnosed " + m.diagnosis + (named.count(m.diagnosis) ? "" : " MISSING"))
            << (hit && !diagnosed && named.size() > want_named.size() ? ", wrong hypothesis hint" : "") << "\n";
        if (hit && (o.verbose || !killed)) out << "         " << hit->tensor << ": " << hit->message << "\n";
        else if (!killed)
          for (const auto& r : mr) out << "         " << r.tensor << ": " << r.message << "\n";
        mutant_cases.push_back(std::move(mc));
      }
    }
  // Layers: every stage's mutants placed in a whole layer must be attributed to their stage (first local divergence).
  if (matches(o.only, "layer") || matches(o.only, "layer_attribution")) {
    s.layers_run = 0;
    for (const auto& ls : golden::layer_catalogue()) s.layers_run += ls.committed ? 1 : 0;
    s.layers_ok = golden::layer_selftest(out, 0, o.backend, o.verbose);
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.1f", 100.0 * s.score());
  out << "base cases: " << s.base_pass << "/" << s.base_total << " pass";
  if (o.backend != Backend::cpu || s.other_backend) {  // which references ran, and what was left out
    out << " (backend " << backend_name(o.backend);
    if (s.other_backend) out << "; " << s.other_backend << " base case(s) of stages without a " << backend_name(o.backend) << " implementation left out";
    out << ")";
  }
  out << "\n";
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
  if (s.base_pass != s.base_total || s.killed != s.mutants_total || !s.layers_ok) return 1;
  if (s.skipped && !o.allow_skip) return 1;
  if (s.base_total == 0) return 1;
  return 0;
}

}  // namespace dsa::selftest
