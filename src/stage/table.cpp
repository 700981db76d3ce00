// THE stage table: one line per stage, in pipeline order. Adding a stage = one folder under src/stages/ + one line
// here (README "Adding a stage").
#include "stage/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa {

const std::vector<Stage>& stages() {
  static const std::vector<Stage> all{
      indexer::quant::stage(),          // indexer.quant          act_quant (v32 §2.5)
      indexer::prolog::stage(),         // indexer.prolog         q/k prolog (v32 §2.1-2.6)
      indexer::kcache_store::stage(),   // indexer.kcache_store   paged fp8 K cache writer (v32 §3.4)
      indexer::logits_ragged::stage(),  // indexer.logits_ragged  DeepGEMM fp8_mqa_logits (v32 §3.2)
      indexer::logits_paged::stage(),   // indexer.logits_paged   DeepGEMM fp8_paged_mqa_logits (v32 §3.3)
      indexer::topk::stage(),           // indexer.topk           top-k with index bases (v32 §5)
  };
  return all;
}

}  // namespace dsa
