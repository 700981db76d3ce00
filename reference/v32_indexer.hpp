// CPU reference of the DeepSeek-V3.2 lightning indexer stages (../shared/specs/v32_indexer_deepgemm_flashmla.md).
// One file per stage in this folder; each function takes a validated case (attr defaults applied) and returns
// the reference for every output of the stage, with what its comparator needs.
#pragma once
#include "stages/expected.hpp"
#include "tensor/case.hpp"

namespace dsa::ref {

Expected indexer_quant(const Case& c, const RefOptions& opt);          // indexer_quant.cpp   (§2.5)
Expected indexer_prolog(const Case& c, const RefOptions& opt);         // indexer_prolog.cpp  (§2.1-2.6)
Expected indexer_kcache_store(const Case& c, const RefOptions& opt);   // indexer_kcache.cpp  (§3.4)
Expected indexer_logits_ragged(const Case& c, const RefOptions& opt);  // indexer_logits.cpp  (§3.2, §3.5)
Expected indexer_logits_paged(const Case& c, const RefOptions& opt);   // indexer_logits.cpp  (§3.3, §3.5)
Expected indexer_topk(const Case& c, const RefOptions& opt);           // indexer_topk.cpp    (§5)

}  // namespace dsa::ref
