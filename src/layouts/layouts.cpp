#include "layouts/layouts.hpp"

#include "layouts/index_base.hpp"
#include "layouts/indexer_kcache.hpp"
#include "layouts/mla_kcache.hpp"
#include "layouts/kv_records.hpp"

namespace dsa::layouts {

const std::vector<LayoutInfo>& all() {
  static const std::vector<LayoutInfo> v = [] {
    std::vector<LayoutInfo> l{
        {IndexerKCache::kName, "cache",
         "V3.2 indexer K cache: pages of page_size tokens, planar: page_size*D fp8 e4m3fn codes then page_size fp32 "
         "scales; tensor u8 [P, page_size, 1, D+4] (spec v32 §3.4)"},
        {IndexerKCache::kAiterRowMajorP1, "cache",
         "the V3.2 indexer K cache of ROCm/aiter's legacy path (indexer_k_quant_and_cache preshuffle=False): "
         "indexer_kcache_planar with page_size 1, i.e. 132-byte token records (128 codes, fp32 scale)"},
        {IndexerKCache::kAiterPreshuffle, "cache",
         "the V3.2 indexer K cache of ROCm/aiter's preshuffle path (MFMA 16x16): per page, tokens in groups of 16, each "
         "group D/16 tiles of 16 tokens x 16 dims (token-major in a tile), then page_size fp32 scales; page_size a "
         "multiple of 16"},
        {MlaKCache::kName, "cache",
         "V3.2 sparse-MLA KV cache (FlashMLA FP8 with scale, vLLM fp8_ds_mla): 656-byte token records in pages of 64: 512 "
         "e4m3fn codes of c, 4 fp32 tile scales (128 dims each), 64 bf16 k_pe; tensor u8 [blocks, 64, 1, 656] (spec v32 §6.3)"},
        {Model1KCache::kName, "cache",
         "DeepSeek-V4 (FlashMLA MODEL1) sparse-MLA KV cache: per block, page_size token records of 576 bytes (448 e4m3fn "
         "NoPE codes, 64 bf16 RoPE) then page_size 8-byte scale records (7 e8m0 tile scales of 64 dims, 1 pad); tensor u8 "
         "[blocks, page_size, 1, 584] (spec v4 §9)"}};
    for (const auto& f : record_formats())
      l.push_back({f.name, "cache", std::string(f.doc) + "; page_segregated or token_interleaved (attr record_order)"});
    for (const auto& n : index_base_names()) l.push_back({n, "index_base", index_base_doc(n)});
    return l;
  }();
  return v;
}

AttrSpec page_size_attr() { return int_attr("page_size", 64, "tokens per page"); }

}  // namespace dsa::layouts
