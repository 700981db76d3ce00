// Layer recipe layer_v32_decode (table.cpp).
#include "stage/gen/gen.hpp"
#include "stages/layers/recipe.hpp"

namespace dsa::golden::layers {

// DeepSeek-V3.2 decode with MTP (next_n = 2), three requests of 20, 100 and 190 tokens (the first shorter than k: -1
// padded indices), as sglang runs it per layer:
//   idx_kcache_store   the step's new index keys into the paged fp8 index cache (planar 132-byte records)
//   idx_logits         paged MQA logits over that cache (q, gates, context_lens, block_table)
//   idx_topk           top-64 per row (FlashMLA needs a multiple of 64) over the causal lengths, emitted as
//                      page_slot (block_table[p/64]*64 + p%64)
//   mla_kcache_store   the step's new latent KV into the 656-byte fp8 MLA cache (same block table, same slots)
//   sparse_mla_decode  FlashMLA sparse decode over the MLA cache on the top-k's slots ([B*next_n, k] read as
//                      [B, next_n, k])
std::vector<Case> build_v32_decode(std::uint64_t seed, int threads) {
  const std::vector<std::int64_t> L{20, 100, 190};
  const std::int64_t next_n = 2, k = 64, ps = 64, B = static_cast<std::int64_t>(L.size());
  GoldenSpec ls = member_spec("idx_logits", "indexer.logits_paged", "logits.paged_mtp");
  ls.lists["context_lens"] = L;
  ls.dims = {{"next_n", next_n}, {"spare_blocks", 1}, {"extra_pages", 2}};
  Case logits = generate_inputs(ls, member_seed(seed, 2), threads);
  const Tensor& bt = logits.input("block_table");
  const std::int64_t P = logits.input("kv_cache").dim(0), maxb = bt.dim(1);
  // The step's new tokens: the last next_n of every request, at their slots of the shared block table.
  std::vector<std::int64_t> slots;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t t = 0; t < next_n; ++t) {
      const std::int64_t j = L[static_cast<std::size_t>(b)] - next_n + t;
      slots.push_back(std::int64_t{bt.data<std::int32_t>()[b * maxb + j / ps]} * ps + j % ps);
    }
  const auto T = static_cast<std::int64_t>(slots.size());
  Tensor slot_mapping = Tensor::from_vector(DType::i64, {T}, slots);

  Case kstore = bare_case("idx_kcache_store", "indexer.kcache_store");
  {
    Tensor codes(DType::fp8_e4m3fn, {T, 128}), scales(DType::f32, {T});
    gen::make_keys(Rng(member_seed(seed, 1)), gen::kK, T, 128, threads, false, codes.data<std::uint8_t>(), scales.data<float>());
    kstore.inputs = {{"k_fp8", codes}, {"k_scale", scales}, {"slot_mapping", slot_mapping}, {"kv_cache_in", logits.input("kv_cache")}};
    kstore.attrs["page_size"] = AttrValue{ps};
  }
  logits.links["kv_cache"] = "idx_kcache_store/expected/kv_cache";

  Case topk = bare_case("idx_topk", "indexer.topk");
  {
    std::vector<std::int32_t> len;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = 0; t < next_n; ++t) len.push_back(static_cast<std::int32_t>(L[static_cast<std::size_t>(b)] - next_n + t + 1));  // causal
    topk.inputs = {{"lengths", Tensor::from_vector(DType::i32, {B * next_n}, len)}, {"page_table", bt}};
    topk.attrs = {{"k", AttrValue{k}}, {"index_base", AttrValue{std::string("page_slot")}}, {"page_size", AttrValue{ps}},
                  {"rows_per_request", AttrValue{next_n}}};
    topk.links["logits"] = "idx_logits/expected/logits";
  }

  GoldenSpec as = member_spec("sparse_mla_decode", "attn.sparse_mla_decode", "sparse_decode.random");
  as.dims = {{"B", B}, {"S", next_n}, {"H", 16}, {"P", P}, {"K", k}};
  Case attn = generate_inputs(as, member_seed(seed, 5), threads);
  attn.links["k_cache"] = "mla_kcache_store/expected/kv_cache";
  attn.links["indices"] = "idx_topk/expected/indices";  // the generated [B, next_n, k] input gives the shape it is read as

  GoldenSpec ms = member_spec("mla_kcache_store", "mla.kcache_store", "mla_kcache.shuffled_slots");
  ms.dims = {{"T", T}, {"P", P}};
  ms.params = {{"pad_frac", 0.0}};
  Case mstore = generate_inputs(ms, member_seed(seed, 4), threads);
  mstore.inputs["slot_mapping"] = slot_mapping;
  mstore.inputs["kv_cache_in"] = attn.input("k_cache");  // every earlier token's record (the generator's full cache)
  return {kstore, logits, topk, mstore, attn};
}

}  // namespace dsa::golden::layers
