// THE layer table: one line per layer recipe (one file each in this folder), listed by `dsa-check golden --list`.
#include "stages/layers/recipe.hpp"

namespace dsa::golden {

const std::vector<LayerSpec>& layer_catalogue() {
  static const std::vector<LayerSpec> cat{
      {.name = "layer_v32_decode",
       .doc = "V3.2 MTP decode layer (next_n 2, requests of 20/100/190 tokens): indexer K store -> paged logits -> top-64 "
              "page_slot -> MLA cache store -> sparse MLA decode on the top-k slots, joined by HDF5 links",
       .seed = 3201,
       .committed = true,
       .build = layers::build_v32_decode},
      {.name = "layer_v4_decode",
       .doc = "V4 C4 MTP decode layer, Ascend A3 path (2 requests of 136/72 tokens): indexer KV compressor -> indexer "
              "prolog (int8 key cache) -> quant lightning indexer top-16 -> sparse attention (SWA + compressed, sinks) -> "
              "o-projection, joined by HDF5 links",
       .seed = 4101,
       .committed = true,
       .build = layers::build_v4_decode},
      {.name = "layer_v4_decode_serving",
       .doc = "the same V4 C4 decode layer at V4-Flash serving size: one step of 64 requests (contexts 1K..16K), indexer "
              "64 x 128 top-512, attention 64 heads x 512, o-projection 1024 -> 4096, compressor over the 4096-wide "
              "hidden state; large, not committed (the end-to-end layer check benchmark)",
       .seed = 4102,
       .committed = false,
       .build = layers::build_v4_decode_serving},
      {.name = "layer_v4_compressor_chain",
       .doc = "vLLM CUDA indexer compressor (D 128, C4) over 3 steps of one history (prefill, then decodes crossing a "
              "compression boundary), chained by state: step n+1's state_cache_in / kv_cache_in = step n's outputs",
       .seed = 4201,
       .committed = true,
       .build = layers::build_v4_compressor_chain},
      {.name = "layer_v41_decode",
       .doc = "V4.1 decode across the candidate source layer (20) and a consumer (24), vLLM + DeepGEMM 2.8 (2 requests of "
              "70/30 tokens): K store (MXFP4) -> q path -> FP4 logits -> top-16 and 4 published blocks -> the consumer's q "
              "-> sparse logits on layer 20's K cache inside the published blocks -> its top-16, joined by HDF5 links",
       .seed = 4111,
       .committed = true,
       .build = layers::build_v41_decode},
  };
  return cat;
}

}  // namespace dsa::golden
