// Attrs shared by several stages of the V3.2 indexer family (declared once: name, default, choices, doc).
#pragma once
#include "schema/schema.hpp"
#include "engines/quant/block_quant.hpp"

namespace dsa::indexer {

AttrSpec scale_fmt_attr();
AttrSpec scale_apply_attr();
AttrSpec amax_eps_attr();
AttrSpec logits_dtype_attr();
AttrSpec page_size_attr();
// attr `layout`: the named indexer K-cache layouts (layouts/indexer_kcache.hpp).
AttrSpec kcache_layout_attr();

// act_quant options from scale_fmt / scale_apply / amax_eps (clamp as given).
dsa::quant::QuantParams quant_params(const AttrReader& a, bool clamp);

// A float attr must be finite and >= 0 (> 0 when `positive`): NaN, inf or negative epsilons are input errors.
void check_finite_attr(const Case& c, const AttrReader& a, const std::string& name, bool positive, std::vector<Problem>& p);

// DeepGEMM's logits kernels: head_dim 32/64/128 and H a positive multiple of 8.
void check_logits_heads(const Case& c, const std::string& tensor, std::int64_t H, std::int64_t Dh, std::vector<Problem>& p);

}  // namespace dsa::indexer
