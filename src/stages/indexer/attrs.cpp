#include "stages/indexer/attrs.hpp"

#include "layouts/indexer_kcache.hpp"

namespace dsa::indexer {

AttrSpec logits_dtype_attr() {
  return str_attr("logits_dtype", "float32", {"float32", "bf16"}, "dtype of the logits output (DeepGEMM @HEAD logits_dtype)");
}
AttrSpec kcache_layout_attr() {
  return str_attr("layout", layouts::IndexerKCache::kName, layouts::indexer_kcache_names(),
                  "byte layout of the indexer K cache: indexer_kcache_planar (DeepGEMM, sglang/vLLM CUDA), aiter_rowmajor_p1 "
                  "(ROCm aiter legacy, page_size 1), aiter_preshuffle (ROCm aiter MFMA 16x16 tiles, page_size % 16 == 0)");
}

void check_logits_heads(const Case& c, const std::string& tensor, std::int64_t H, std::int64_t Dh, std::vector<Problem>& p) {
  if (Dh != 32 && Dh != 64 && Dh != 128) p.push_back({c.file, c.name, tensor, "head_dim 32, 64 or 128", std::to_string(Dh)});
  if (H <= 0 || H % 8 != 0)
    p.push_back({c.file, c.name, tensor, "heads H a positive multiple of 8 (DeepGEMM head reduction)", std::to_string(H)});
}

}  // namespace dsa::indexer
