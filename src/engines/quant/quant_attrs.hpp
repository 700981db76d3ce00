// The attrs that name the block quantizer's options (quant_core.hpp), declared once for every writer stage that
// quantizes with it (indexer.quant, indexer.prolog, mla.kcache_store): name, default, choices, doc.
#pragma once
#include "engines/quant/quant_core.hpp"
#include "schema/schema.hpp"

namespace dsa::quant {

AttrSpec scale_fmt_attr();
AttrSpec scale_apply_attr();
AttrSpec amax_eps_attr();

// QuantParams from scale_fmt / scale_apply / amax_eps (clamp as given).
QuantParams quant_params(const AttrReader& a, bool clamp);

}  // namespace dsa::quant
