// The attrs that name the block quantizer's options (quant_core.hpp), declared once for every writer stage that
// quantizes with it (indexer.quant, indexer.prolog, mla.kcache_store, ...): the same names and values everywhere.
//   scale_fmt    the scale rule: ue8m0 | pow2 | fp32_div | fp32_mul | bf16_div | bf16_mul (+ the older spellings
//                amax448, amax448_eps, flt_min of mla.kcache_store)
//   eps_on       where amax_eps floors: rule (the rule's own place) | amax | scale
//   amax_eps     the floor
//   scale_apply  the element step: div | mul_inv
#pragma once
#include <string>
#include <vector>

#include "engines/quant/quant_core.hpp"
#include "schema/schema.hpp"

namespace dsa::quant {

// Every value of scale_fmt (one list: every writer stage accepts all of them).
const std::vector<std::string>& scale_fmt_names();
AttrSpec scale_fmt_attr(const std::string& def = "ue8m0");
AttrSpec eps_on_attr();
AttrSpec scale_apply_attr();
AttrSpec amax_eps_attr();

// The rule a case names (scale_fmt, eps_on, amax_eps); an inconsistent combination is a Problem.
ScaleRule scale_rule(const Case& c, const AttrReader& a, std::vector<Problem>& p);
// QuantParams from scale_fmt / eps_on / amax_eps / scale_apply (clamp as given).
QuantParams quant_params(const Case& c, const AttrReader& a, bool clamp, std::vector<Problem>& p);
// A one-line formula of a rule (messages, describe): e.g. "2^ceil(log2(fl32(max(amax, 0.0001) * fl32(1/448))))".
std::string rule_formula(const ScaleRule& r);

}  // namespace dsa::quant
