// Attrs shared by several stages of the V3.2 indexer family (declared once: name, default, choices, doc).
#pragma once
#include "schema/schema.hpp"

namespace dsa::indexer {

AttrSpec logits_dtype_attr();
// attr `layout`: the named indexer K-cache layouts (layouts/indexer_kcache.hpp).
AttrSpec kcache_layout_attr();

// DeepGEMM's logits kernels: head_dim 32/64/128 and H a positive multiple of 8.
void check_logits_heads(const Case& c, const std::string& tensor, std::int64_t H, std::int64_t Dh, std::vector<Problem>& p);

}  // namespace dsa::indexer
