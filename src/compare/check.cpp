// Glue of one case's checks: tolerance resolution, emulation policy, shape/dtype gate, dispatch by CompareKind.
//
// Emulation policy: when a case declares `kernel` (e.g. deepgemm-sm90) and its stage lists that emulation profile,
// the output must be BIT-EXACT against the emulation. A mismatch is a FAIL even when the output is within the
// stage's bound ("not bit-exact vs deepgemm-sm90 emulation (N elements); within sm90-fp8 bound"): the kernel did
// something other than what it claims. `--no-emulation` judges by the bound only. Goldens (expected/) are judged by
// the bound when they are not the emulation.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"
#include "stages/registry.hpp"

namespace dsa::cmp {

std::string_view verdict_name(Verdict v) {
  switch (v) {
    case Verdict::BITEXACT: return "BITEXACT";
    case Verdict::WITHIN_BOUND: return "WITHIN_BOUND";
    case Verdict::FAIL: return "FAIL";
    case Verdict::NONFINITE: return "NONFINITE";
    case Verdict::MASK_MISMATCH: return "MASK_MISMATCH";
    case Verdict::STRUCTURE: return "STRUCTURE";
    case Verdict::SHAPE: return "SHAPE";
    case Verdict::DTYPE: return "DTYPE";
    case Verdict::ERROR: return "ERROR";
  }
  return "?";
}

std::optional<Verdict> parse_verdict(std::string_view s) {
  for (auto v : {Verdict::BITEXACT, Verdict::WITHIN_BOUND, Verdict::FAIL, Verdict::NONFINITE, Verdict::MASK_MISMATCH,
                 Verdict::STRUCTURE, Verdict::SHAPE, Verdict::DTYPE, Verdict::ERROR})
    if (verdict_name(v) == s) return v;
  return std::nullopt;
}

nlohmann::json num_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

namespace {
nlohmann::json loc_json(const Location& l) {
  return {{"flat", l.flat}, {"where", l.where}, {"out", num_json(l.out)}, {"ref", num_json(l.ref)},
          {"err", num_json(l.err)}, {"bound", num_json(l.bound)}};
}
}  // namespace

nlohmann::json to_json(const CheckResult& r) {
  nlohmann::json j{{"file", r.file}, {"case", r.case_name}, {"stage", r.stage}, {"group", r.group},
                   {"tensor", r.tensor}, {"kind", std::string(compare_kind_name(r.kind))},
                   {"verdict", std::string(verdict_name(r.verdict))}, {"pass", r.pass()}, {"message", r.message},
                   {"numel", r.numel}, {"mismatches", r.mismatches},
                   {"tolerance", {{"profile", r.tol.profile}, {"rtol", num_json(r.tol.rtol)}, {"atol", num_json(r.tol.atol)}}},
                   {"notes", r.notes}};
  if (r.first) j["first"] = loc_json(*r.first);
  if (r.worst) j["worst"] = loc_json(*r.worst);
  if (!r.emulation.empty()) j["emulation"] = {{"profile", r.emulation}, {"mismatches", r.emulation_mismatches}};
  if (r.bounded) {
    const auto& s = *r.bounded;
    j["bounded"] = {{"compared", s.compared}, {"max_abs", num_json(s.max_abs)}, {"max_rel", num_json(s.max_rel)},
                    {"max_err_over_m", num_json(s.max_err_over_m)}, {"max_ulp", num_json(s.max_ulp)},
                    {"ulp_bits", s.ulp_bits}, {"cosine", num_json(s.cosine)}, {"calc_diff", num_json(s.calc_diff)},
                    {"ratio_rel_lt_1e-3", num_json(s.ratio_rel_1e3)}, {"ratio_rel_lt_5e-3", num_json(s.ratio_rel_5e3)},
                    {"min_rtol", num_json(s.min_rtol)}};
  }
  if (r.topk) {
    const auto& s = *r.topk;
    j["topk"] = {{"rows", s.rows}, {"recall", num_json(s.recall)}, {"min_recall", num_json(s.min_recall)},
                 {"jaccard", num_json(s.jaccard)}, {"band", s.band}, {"max_band", s.max_band}, {"swaps", s.swaps},
                 {"hard_misses", s.hard_misses}, {"hard_extras", s.hard_extras}, {"examples", s.examples}};
  }
  return j;
}

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

Tolerance resolve_tolerance(const Case& c, const std::string& tensor, const CheckOptions& o) {
  std::string prof = o.profile;
  if (prof.empty() && c.has_attr("logits_dtype") && c.attr_str("logits_dtype", "float32") == "bf16") prof = "bf16-logits";
  if (prof.empty()) {
    const Stage* st = find_stage(c.stage);
    prof = st ? st->default_tolerance : "exact";
  }
  const TolerancePolicy* p = find_tolerance_profile(prof);
  if (!p) {
    std::string names;
    for (const auto& q : tolerance_profiles()) names += (names.empty() ? "" : ", ") + q.name;
    throw std::invalid_argument("unknown tolerance profile '" + prof + "' (known: " + names + ")");
  }
  Tolerance t{p->name, p->rtol, p->atol};
  auto apply = [&](const std::vector<std::pair<std::string, double>>& ov, double& dst) {
    for (const auto& [n, v] : ov)  // bare values first, then the tensor's own (later wins)
      if (n.empty()) dst = v;
    for (const auto& [n, v] : ov)
      if (n == tensor) dst = v;
  };
  const double r0 = t.rtol, a0 = t.atol;
  apply(o.rtol, t.rtol);
  apply(o.atol, t.atol);
  if (t.rtol != r0 || t.atol != a0) t.profile += "+override";
  return t;
}

std::string requested_emulation(const Case& c, const CheckOptions& o) {
  if (o.no_emulation || !c.has_attr("kernel")) return "";
  const Stage* st = find_stage(c.stage);
  std::string k;
  try {
    k = c.attr_str("kernel", "");
  } catch (const std::exception&) {
    return "";
  }
  if (!st || std::find(st->emulation_profiles.begin(), st->emulation_profiles.end(), k) == st->emulation_profiles.end())
    return "";
  return k;
}

CheckResult compare_tensor(const Case& c, const std::string& group, const Tensor& out, const RefTensor& ref,
                           const CheckOptions& o) {
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
      r = compare_bytes(out, ref);
    } else if (ref.kind == CompareKind::topk_set) {
      r = compare_topk(out, ref, resolve_tolerance(c, ref.name, o));
    } else {
      const Tolerance tol = resolve_tolerance(c, ref.name, o);
      const std::string emu = requested_emulation(c, o);
      auto it = emu.empty() ? ref.emulations.end() : ref.emulations.find(emu);
      r = compare_bounded(out, ref, tol);
      if (!emu.empty() && it == ref.emulations.end()) {
        r.notes.push_back("emulation " + emu + " requested by attr kernel but not provided by the reference; judged by bound");
      } else if (it != ref.emulations.end()) {
        CheckResult e = compare_bounded(out, ref, Tolerance{emu, 0.0, 0.0}, &it->second);
        r.emulation = emu;
        std::int64_t diff = 0;
        const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
        for (std::int64_t i = 0; i < out.numel(); ++i) {
          if (def && !def[i]) continue;
          const double a = out.value(i), b = it->second.value(i);
          if (out.bits(i) != it->second.bits(i) && !(std::isnan(a) && std::isnan(b))) ++diff;
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
  if (r.verdict != Verdict::ERROR && r.verdict != Verdict::SHAPE && r.verdict != Verdict::DTYPE) {
    for (auto& f : sanity_findings(c, ref.name, out, &ref)) {
      if (!r.pass()) r.message += "; hint: " + f;
      r.notes.push_back(f);
    }
  }
  return r;
}

RefOptions reference_options(const Case& c, const CheckOptions& o) {
  RefOptions ro;
  ro.threads = o.threads;
  if (const auto emu = requested_emulation(c, o); !emu.empty()) ro.emulations.push_back(emu);
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

// Checks before any reference runs; an empty result means the case can be checked.
std::vector<CheckResult> precheck(const Case& c) {
  if (!find_stage(c.stage)) return {case_error(c, "-", c.where() + ": unknown stage '" + c.stage + "'")};
  if (c.outputs.empty() && c.expected.empty())
    return {case_error(c, "-", c.where() + ": nothing to check: the case has no outputs/ (kernel results) and no expected/ group")};
  return {};
}

}  // namespace

std::vector<CheckResult> check_case(const Case& c, const CheckOptions& o) {
  if (auto res = precheck(c); !res.empty()) return res;
  Expected E;
  try {
    E = run_reference(c, reference_options(c, o));
  } catch (const std::exception& e) {
    std::vector<CheckResult> res{case_error(c, "-", c.where() + ": reference of stage " + c.stage + " failed: " + e.what())};
    for (const auto& [n, t] : c.outputs)  // what can be said without a reference
      for (auto& f : sanity_findings(c, n, t, nullptr)) res.back().notes.push_back("outputs/" + n + ": " + f);
    return res;
  }
  return check_case(c, o, E);
}

std::vector<CheckResult> check_case(const Case& c, const CheckOptions& o, const Expected& E) {
  if (auto res = precheck(c); !res.empty()) return res;
  const Stage* st = find_stage(c.stage);
  std::vector<CheckResult> res;
  // Stage output order first, then anything else (alphabetical).
  std::vector<std::string> order;
  for (const auto& os : st->outputs) order.push_back(os.tensor.name);
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
      res.push_back(compare_tensor(c, gname, it->second, *ref, o));
    }
  }
  return res;
}

}  // namespace dsa::cmp
