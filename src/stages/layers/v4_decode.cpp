// Layer recipe layer_v4_decode (table.cpp).
#include "stages/layers/recipe.hpp"

namespace dsa::golden::layers {

// DeepSeek-V4 C4 decode with MTP (2 tokens per request, two requests of 136 and 72 tokens: each step completes one
// compressed entry per request), the Ascend A3 path of vLLM-Ascend's AscendDSAImpl:
//   compressor      the indexer's KV compressor (ratio 4 with overlap, D 128, Hadamard-rotated): the step's entries
//   indexer_prolog  those rows int8-quantised into the paged key cache; the queries quantised, head weights to fp16
//   indexer         the quant lightning indexer (QLI): top-16 compressed entries per query row (34 / 18 visible)
//   sparse_attn     sparse attention over the SWA window plus the QLI's entries (16 heads, 512 dims, sinks)
//   attn_out        inverse RoPE and the grouped o-projection (wo_a, wo_b)
std::vector<Case> build_v4_decode(std::uint64_t seed, int threads) {
  const std::vector<std::int64_t> ql{2, 2}, kvl{136, 72};
  const std::int64_t B = 2, T = 4, K = 16, bs = 16;
  GoldenSpec is = member_spec("indexer", "v4.indexer", "v4i.requests");
  is.dims = {{"H", 64}, {"D", 128}, {"bs", bs}};
  is.lists = {{"q_len", ql}, {"kv_len", kvl}};
  is.attrs = {{"sparse_count", AttrValue{K}}, {"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case idx = generate_inputs(is, member_seed(seed, 3), threads);
  const Tensor& bt = idx.input("block_table");
  const std::int64_t nblk = idx.input("key").dim(0), maxblk = bt.dim(1);

  GoldenSpec cs = member_spec("compressor", "v4.compressor", "v4c.step");
  cs.dims = {{"D", 128}, {"H", 256}, {"bs", 16}};
  cs.lists = {{"start_pos", {kvl[0] - ql[0], kvl[1] - ql[1]}}, {"q_len", ql}};
  cs.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}, {"coff", AttrValue{std::int64_t{2}}}, {"rotate", AttrValue{std::int64_t{1}}}};
  Case cmp = generate_inputs(cs, member_seed(seed, 1), threads);

  // The prolog scatters the step's entries (entry kv_len/4 - 1 of each request; the compressor's pad row skipped)
  // into the indexer's key cache.
  GoldenSpec ps = member_spec("indexer_prolog", "v4.indexer_prolog", "v4ip.rows");
  const std::int64_t R = cmp.input("rope_cos").dim(0);
  ps.dims = {{"T", T}, {"H", 64}, {"D", 128}, {"R", R}, {"bs", bs}, {"nblk", nblk}};
  ps.params = {{"flat", 1.0}};
  Case pro = generate_inputs(ps, member_seed(seed, 2), threads);
  {
    Tensor sm(DType::i32, {R});
    for (std::int64_t r = 0; r < R; ++r) {
      const std::int64_t j = r < B ? kvl[static_cast<std::size_t>(r)] / 4 - 1 : -1;
      sm.data<std::int32_t>()[r] = j < 0 ? -1 : static_cast<std::int32_t>(std::int64_t{bt.data<std::int32_t>()[r * maxblk + j / bs]} * bs + j % bs);
    }
    pro.inputs["slot_mapping"] = sm;
    pro.inputs["k_cache_in"] = idx.input("key");
    pro.inputs["k_scale_cache_in"] = idx.input("key_dequant_scale");
    pro.links["k"] = "compressor/expected/cmp_kv";
  }
  idx.links = {{"query", "indexer_prolog/expected/q_int8"},
               {"query_dequant_scale", "indexer_prolog/expected/q_scale"},
               {"weights", "indexer_prolog/expected/weights_fp16"},
               {"key", "indexer_prolog/expected/k_cache"},
               {"key_dequant_scale", "indexer_prolog/expected/k_scale_cache"}};

  GoldenSpec as = member_spec("sparse_attn", "attn.v4_sparse", "v4_sparse.requests");
  as.dims = {{"N", 16}, {"D", 512}, {"bs_o", 32}, {"bs_c", 16}, {"K", K}};
  as.lists = {{"q_len", ql}, {"kv_len", kvl}};
  as.params = {{"sink", 1.0}};
  as.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case att = generate_inputs(as, member_seed(seed, 4), threads);
  att.links["cmp_sparse_indices"] = "indexer/expected/sparse_indices";

  GoldenSpec os = member_spec("attn_out", "attn.v4_out", "v4_out.tokens");
  os.dims = {{"T", T}, {"N", 16}, {"D", 512}, {"R", 16}, {"dim", 256}};
  os.attrs = {{"o_groups", AttrValue{std::int64_t{8}}}};
  Case out = generate_inputs(os, member_seed(seed, 5), threads);
  out.links["o"] = "sparse_attn/expected/out";
  return {cmp, pro, idx, att, out};
}

}  // namespace dsa::golden::layers
