// Verdict names and the JSON form of a CheckResult (shared by the JSON report and `merge`-style readers).
#include <cmath>

#include "compare/compare.hpp"

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
                    {"ulp_bits", s.ulp_bits}, {"ulp_compared", s.ulp_compared}, {"cosine", num_json(s.cosine)}, {"calc_diff", num_json(s.calc_diff)},
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

}  // namespace dsa::cmp
