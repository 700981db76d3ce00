// The softmax scale of every attention stage: one name, `softmax_scale` (FlashMLA's flash_mla_with_kvcache keyword,
// vLLM, the Ascend ops); `sm_scale` (flash_mla_sparse_fwd's argument name) is accepted as its alias, and a case that
// carries both with different values is an error. Where the engine has a default, it is derived as the engine
// derives it (FlashMLA: q.shape[-1] ** -0.5, so 576^-0.5 for V3.2 and 512^-0.5 for MODEL1), never a constant.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "schema/schema.hpp"

namespace dsa::sparse_attn {

// The two attr declarations (softmax_scale without a fixed default; sm_scale its alias).
std::vector<AttrSpec> softmax_scale_attrs(const std::string& doc);
// d ** -0.5 as Python computes it for the head dims engines use (correctly rounded 1/sqrt(d)).
double inv_sqrt(std::int64_t d);
// The case's scale: softmax_scale, else sm_scale, else `derived` (the engine's default; nullopt = the engine has none:
// a Problem saying so). Non-finite values and two different spellings are Problems.
double softmax_scale(const Case& c, const AttrReader& a, std::optional<double> derived, const std::string& derived_doc,
                     std::vector<Problem>& p);

}  // namespace dsa::sparse_attn
