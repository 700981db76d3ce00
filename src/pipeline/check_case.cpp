#include "pipeline/check_case.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "compare/detail.hpp"

namespace dsa::pipeline {

using cmp::CheckResult;
using cmp::Tolerance;
using cmp::Verdict;
namespace detail = cmp::detail;

std::pair<std::string, double> parse_tol_override(const std::string& s) {
  const auto colon = s.rfind(':');
  const std::string name = colon == std::string::npos ? "" : s.substr(0, colon);
  const std::string val = colon == std::string::npos ? s : s.substr(colon + 1);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(val, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != val.size() || val.empty() || !(v >= 0) || !std::isfinite(v))
    throw std::invalid_argument("tolerance '" + s + "': expected NAME:VALUE or VALUE with a finite value >= 0");
  return {name, v};
}

const Profile* requested_emulation(const BoundCase& b, const CheckOptions& o) {
  if (o.no_emulation) return nullptr;
  const Profile* k = kernel_profile(*b.c);
  return k && k->emulates(b.stage->name) ? k : nullptr;
}

std::vector<std::string> hypothesis_findings(const BoundCase& b, const Tensor& out, const RefTensor& ref, const Tolerance& tol) {
  std::vector<std::string> f;
  if (!b.params || !b.c) return f;
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  const bool has_m = ref.magnitude.defined() && ref.magnitude.numel() == ref.value.numel();
  const double* mag = has_m ? ref.magnitude.data<double>() : nullptr;
  int p = 24, emin = -126;
  detail::ulp_format(out.dtype(), p, emin);
  auto failing = [&](std::int64_t i) {
    if (def && !def[i]) return false;
    const double o = out.value(i), e = ref.value.value(i);
    return std::isfinite(o) && std::isfinite(e) && std::fabs(o - e) > tol.rtol * (mag ? mag[i] : std::fabs(e)) + tol.atol;
  };
  for (const auto& h : b.stage->hypotheses) {
    if (h.tensor != ref.name || !h.value) continue;
    // A fixed sample of at most 64 failing elements (evenly spread; deterministic).
    std::int64_t n_fail = 0;
    for (std::int64_t i = 0; i < out.numel(); ++i) n_fail += failing(i);
    if (n_fail == 0) continue;
    const std::int64_t stride = std::max<std::int64_t>(1, n_fail / 64);
    std::int64_t seen = 0, tried = 0, matched = 0;
    for (std::int64_t i = 0; i < out.numel() && tried < 64; ++i) {
      if (!failing(i) || seen++ % stride != 0) continue;
      std::optional<Hypothesis::Value> alt;
      try {  // a hint must never turn a verdict into an error (e.g. a case bound without its inputs)
        alt = h.value(*b.c, *b.params, i);
      } catch (const std::exception&) {
        break;
      }
      if (!alt || !std::isfinite(alt->value)) continue;
      ++tried;
      // The buggy kernel errs like a correct one around its own value, then rounds to the output dtype.
      const double slack = tol.rtol * std::fabs(alt->magnitude) + tol.atol + detail::ulp_at(alt->value, p, emin);
      if (std::fabs(out.value(i) - alt->value) <= slack) ++matched;
    }
    if (tried > 0 && matched * 10 >= tried * 9)
      f.push_back(h.bug + kHypothesisMatch + " (" + h.doc + ") at " + std::to_string(matched) +
                  " of " + std::to_string(tried) + " sampled failing element(s)");
  }
  return f;
}

CheckResult compare_tensor(const BoundCase& b, const std::string& group, const Tensor& out, const RefTensor& ref,
                           const CheckOptions& o) {
  const Case& c = *b.c;
  CheckResult r;
  try {
    const bool index_ok = ref.kind == CompareKind::topk_set && dtype_is_integer(out.dtype()) &&
                          dtype_is_integer(ref.value.dtype());  // i32 or i64 indices are both fine
    if (out.dtype() != ref.value.dtype() && !index_ok) {
      r.verdict = Verdict::DTYPE;
      r.message = "dtype " + std::string(dtype_name(out.dtype())) + ", reference has " + std::string(dtype_name(ref.value.dtype()));
    } else if (out.shape() != ref.value.shape()) {
      r.verdict = Verdict::SHAPE;
      r.message = "shape " + shape_str(out.shape()) + ", reference has " + shape_str(ref.value.shape());
    } else if (ref.kind == CompareKind::bytes) {
      r = cmp::compare_bytes(out, ref, o.nan);
    } else if (ref.kind == CompareKind::topk_set) {
      r = cmp::compare_topk(out, ref, resolve_tolerance(b, ref.name, o.tol));
    } else {
      const Tolerance tol = resolve_tolerance(b, ref.name, o.tol);
      const Profile* prof = requested_emulation(b, o);
      const std::string emu = prof ? prof->name : "";
      auto it = emu.empty() ? ref.emulations.end() : ref.emulations.find(emu);
      r = cmp::compare_bounded(out, ref, tol);
      if (!emu.empty() && it == ref.emulations.end()) {
        r.notes.push_back("emulation " + emu + " requested by attr kernel but not provided by the reference; judged by bound");
      } else if (it != ref.emulations.end()) {
        CheckResult e = cmp::compare_bounded(out, ref, Tolerance{emu, 0.0, 0.0}, &it->second);
        r.emulation = emu;
        std::int64_t diff = 0;
        const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
        for (std::int64_t i = 0; i < out.numel(); ++i) {
          if (def && !def[i]) continue;
          const double x = out.value(i), y = it->second.value(i);
          if (out.bits(i) != it->second.bits(i) && !(std::isnan(x) && std::isnan(y))) ++diff;
        }
        r.emulation_mismatches = diff;
        if (diff == 0) {
          r.verdict = Verdict::BITEXACT;
          r.message = "bit-exact vs " + emu + " emulation; vs exact value: " +
                      (r.bounded ? "max err/M " + detail::fmt(r.bounded->max_err_over_m) : r.message);
        } else if (r.pass() && group == "expected") {
          // A golden may hold the exact value: the emulation policy is for kernel outputs only.
          r.notes.push_back("expected/ is not the " + emu + " emulation (" + std::to_string(diff) + " elements); judged by the bound");
        } else if (r.pass()) {
          r.verdict = Verdict::FAIL;
          r.first = e.first;
          r.worst = e.worst;
          r.mismatches = diff;
          r.message = "not bit-exact vs " + emu + " emulation (" + std::to_string(diff) + " elements; first at " +
                      (e.first ? detail::loc_str(*e.first) : std::string("?")) + "); within " + tol.profile +
                      " bound (" + r.message + "); use --no-emulation to judge by the bound only";
        } else {
          r.message += "; also not bit-exact vs " + emu + " emulation (" + std::to_string(diff) + " elements)";
        }
      }
    }
  } catch (const std::exception& e) {
    r.verdict = Verdict::ERROR;
    r.message = e.what();
  }
  r.kind = ref.kind;
  r.tensor = ref.name;
  r.group = group;
  r.file = c.file;
  r.case_name = c.name;
  r.stage = c.stage;
  if (r.verdict == Verdict::FAIL && ref.kind == CompareKind::bounded)
    for (auto& f : hypothesis_findings(b, out, ref, resolve_tolerance(b, ref.name, o.tol))) {
      r.message += "; hint: " + f;
      r.notes.push_back(f);
    }
  if (r.verdict != Verdict::ERROR && r.verdict != Verdict::SHAPE && r.verdict != Verdict::DTYPE) {
    for (auto& f : sanity_findings(b, ref.name, out, &ref)) {
      if (!r.pass()) r.message += "; hint: " + f;
      r.notes.push_back(f);
    }
  }
  return r;
}

RefOptions reference_options(const BoundCase& b, const CheckOptions& o) {
  RefOptions ro;
  ro.threads = o.threads;
  ro.emulation = requested_emulation(b, o);
  return ro;
}

namespace {

CheckResult case_error(const Case& c, const std::string& tensor, const std::string& msg) {
  CheckResult r;
  r.file = c.file;
  r.case_name = c.name;
  r.stage = c.stage;
  r.group = "case";
  r.tensor = tensor;
  r.verdict = Verdict::ERROR;
  r.message = msg;
  return r;
}

std::vector<CheckResult> nothing_to_check(const Case& c) {
  return {case_error(c, "-", c.where() + ": nothing to check: the case has no outputs/ (kernel results) and no expected/ group")};
}

// Checks before any reference runs: the case is valid and bound, and has something to check.
std::vector<CheckResult> precheck(const Case& c, BoundCase& b) {
  if (!find_stage(c.stage)) return {case_error(c, "-", c.where() + ": unknown stage '" + c.stage + "'")};
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  if (auto p = validate_case(c, true, &b); !p.empty()) {
    std::vector<CheckResult> res;
    for (const auto& q : p) res.push_back(case_error(c, "-", q.str()));
    return res;
  }
  return {};
}

}  // namespace

std::vector<CheckResult> check_case(const Case& c, const CheckOptions& o) {
  BoundCase b;
  if (auto res = precheck(c, b); !res.empty()) return res;
  return check_case(b, o);
}

std::vector<CheckResult> check_case(const BoundCase& b, const CheckOptions& o) {
  const Case& c = *b.c;
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  Expected E;
  try {
    E = run_reference(b, reference_options(b, o), o.backend);
  } catch (const std::exception& e) {
    std::vector<CheckResult> res{case_error(c, "-", c.where() + ": reference of stage " + c.stage + " failed: " + e.what())};
    for (const auto& [n, t] : c.outputs)  // what can be said without a reference
      for (auto& f : sanity_findings(b, n, t, nullptr)) res.back().notes.push_back("outputs/" + n + ": " + f);
    return res;
  }
  return check_case(b, o, E);
}

std::vector<CheckResult> check_case(const BoundCase& b, const CheckOptions& o, const Expected& E) {
  const Case& c = *b.c;
  const Stage* st = b.stage;
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  std::vector<CheckResult> res;
  // Stage output order first, then anything else (alphabetical).
  std::vector<std::string> order;
  for (const auto& os : st->schema.outputs) order.push_back(os.tensor.name);
  for (const auto* g : {&c.outputs, &c.expected})
    for (const auto& [n, t] : *g)
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  for (const auto& [gname, g] : {std::pair<std::string, const TensorMap*>{"outputs", &c.outputs}, {"expected", &c.expected}}) {
    for (const auto& n : order) {
      auto it = g->find(n);
      if (it == g->end()) continue;
      const RefTensor* ref = E.find(n);
      if (!ref) {
        res.push_back(case_error(c, gname + "/" + n, c.where() + ": " + gname + "/" + n + ": the reference of stage " + c.stage + " has no such output"));
        continue;
      }
      res.push_back(compare_tensor(b, gname, it->second, *ref, o));
    }
  }
  return res;
}

std::vector<std::string> sanity_findings(const BoundCase& b, const std::string& tensor, const Tensor& out, const RefTensor* ref) {
  std::vector<std::string> f;
  for (const auto& os : b.stage->schema.outputs) {
    if (os.tensor.name != tensor) continue;
    if (os.positive)
      if (auto x = cmp::finding_not_positive(out, ref)) f.push_back(*x);
    if (os.nonconstant_rows)
      if (auto x = cmp::finding_constant_rows(out, ref)) f.push_back(*x);
  }
  if (b.stage->sanity) b.stage->sanity(*b.c, tensor, out, f);
  if (ref)
    if (auto x = cmp::finding_positional_topk(out, *ref)) f.push_back(*x);
  return f;
}

}  // namespace dsa::pipeline
