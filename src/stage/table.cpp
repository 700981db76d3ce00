// THE stage table: one line per stage, in pipeline order (the line's position IS the stage's pipeline order: the
// first-divergence report and layer member order read it). Adding a stage = one folder under src/stages/ + one line
// here (docs/architecture.md "Adding a stage").
#include "stage/stage.hpp"
#include "stages/attn/table.hpp"
#include "stages/indexer/table.hpp"
#include "stages/mla/table.hpp"
#include "stages/v4/table.hpp"
#include "stages/v41/table.hpp"

namespace dsa {

const std::vector<Stage>& stages() {
  static const std::vector<Stage> all = finish_table({
      indexer::quant::stage(),          // indexer.quant          act_quant (v32 §2.5)
      indexer::prolog::stage(),         // indexer.prolog         q/k prolog (v32 §2.1-2.6)
      indexer::kcache_store::stage(),   // indexer.kcache_store   paged fp8 K cache writer (v32 §3.4)
      indexer::logits_ragged::stage(),  // indexer.logits_ragged  DeepGEMM fp8_mqa_logits (v32 §3.2)
      indexer::logits_paged::stage(),   // indexer.logits_paged   DeepGEMM fp8_paged_mqa_logits (v32 §3.3)
      indexer::topk::stage(),           // indexer.topk           top-k with index bases (v32 §5)
      indexer::fused::stage(),          // indexer.fused          fused paged logits + top-k (v32 §3.3, §5)
      indexer::npu_lightning::stage(),  // indexer.npu_lightning  Ascend V3.2 lightning indexer + CP split (v4 §5)
      mla::kcache_store::stage(),       // mla.kcache_store       656-byte fp8 MLA cache writer (v32 §6.3)
      attn::sparse_mla_prefill::stage(),  // attn.sparse_mla_prefill  FlashMLA flash_mla_sparse_fwd (v32 §6.1)
      attn::sparse_mla_decode::stage(),   // attn.sparse_mla_decode   FlashMLA sparse fp8 decode (v32 §6.2)
      v4::compressor::stage(),            // v4.compressor            DeepSeek-V4 KV compressor (v4 §2)
      v4::compressor_cache::stage(),      // v4.compressor_cache      vLLM CUDA compressor into the paged fp8 KV cache (v4 §10)
      v4::indexer_prolog::stage(),        // v4.indexer_prolog        Ascend indexer q/k int8 quant, weights, scatter (v4 §3.1-3.4)
      v4::indexer::stage(),               // v4.indexer               Ascend quant lightning indexer (v4 §3.5)
      v41::indexer_k::stage(),            // v41.indexer_k            V4.1 indexer K store: k_norm, RoPE, MXFP4 / FP8 (vLLM) (v41 §5)
      v41::logits::stage(),               // v41.logits               V4.1 FP4 indexer logits: DeepGEMM ragged and paged sparse (v41 §5)
      v41::select::stage(),               // v41.select               V4.1 indexer selection, two-level candidates (v41 §5)
      attn::v4_sparse::stage(),           // attn.v4_sparse           Ascend sliding window + compressed KV + sinks (v4 §4)
      attn::v4_out::stage(),              // attn.v4_out              inverse RoPE + grouped o-projection (v4 §4.4)
  });
  return all;
}

}  // namespace dsa
