// Layer recipes layer_v4_decode and layer_v4_decode_serving (table.cpp).
#include "stages/layers/recipe.hpp"

namespace dsa::golden::layers {

// DeepSeek-V4 C4 decode with MTP (2 tokens per request, two requests of 136 and 72 tokens: each step completes one
// compressed entry per request), the Ascend A3 path of vLLM-Ascend's AscendDSAImpl:
//   compressor      the indexer's KV compressor (ratio 4 with overlap, D 128, Hadamard-rotated): the step's entries
//   indexer_prolog  those rows int8-quantised into the paged key cache; the queries quantised, head weights to fp16
//   indexer         the quant lightning indexer (QLI): top-16 compressed entries per query row (34 / 18 visible)
//   sparse_attn     sparse attention over the SWA window plus the QLI's entries (16 heads, 512 dims, sinks)
//   attn_out        inverse RoPE and the grouped o-projection (wo_a, wo_b)
namespace {

// The layer's sizes: the committed golden is small; the serving one is V4-Flash's (layer_v4_decode_serving).
struct V4DecodeShape {
  std::vector<std::int64_t> ql, kvl;  // per request: query tokens of the step, tokens after it (kvl % 4 == 0)
  std::int64_t K;                     // the indexer's top-k (sparse_count) = the attention's compressed keys
  std::int64_t bs;                    // the indexer's key cache block
  std::int64_t hidden;                // the compressor's input width
  std::int64_t N;                     // attention heads
  std::int64_t bs_o, bs_c;            // the attention's SWA / compressed cache blocks
  std::int64_t R, dim;                // o_lora_rank, model width
};

std::vector<Case> build(std::uint64_t seed, int threads, const V4DecodeShape& sh) {
  const std::vector<std::int64_t>& ql = sh.ql;
  const std::vector<std::int64_t>& kvl = sh.kvl;
  const auto B = static_cast<std::int64_t>(ql.size());
  std::int64_t T = 0;
  for (auto q : ql) T += q;
  const std::int64_t K = sh.K, bs = sh.bs;
  GoldenSpec is = member_spec("indexer", "v4.indexer", "v4i.requests");
  is.dims = {{"H", 64}, {"D", 128}, {"bs", bs}};
  is.lists = {{"q_len", ql}, {"kv_len", kvl}};
  is.attrs = {{"sparse_count", AttrValue{K}}, {"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case idx = generate_inputs(is, member_seed(seed, 3), threads);
  const Tensor& bt = idx.input("block_table");
  const std::int64_t nblk = idx.input("key").dim(0), maxblk = bt.dim(1);

  GoldenSpec cs = member_spec("compressor", "v4.compressor", "v4c.step");
  cs.dims = {{"D", 128}, {"H", sh.hidden}, {"bs", 16}};
  std::vector<std::int64_t> start(ql.size());
  for (std::size_t b = 0; b < ql.size(); ++b) start[b] = kvl[b] - ql[b];
  cs.lists = {{"start_pos", start}, {"q_len", ql}};
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
  as.dims = {{"N", sh.N}, {"D", 512}, {"bs_o", sh.bs_o}, {"bs_c", sh.bs_c}, {"K", K}};
  as.lists = {{"q_len", ql}, {"kv_len", kvl}};
  as.params = {{"sink", 1.0}};
  as.attrs = {{"cmp_ratio", AttrValue{std::int64_t{4}}}};
  Case att = generate_inputs(as, member_seed(seed, 4), threads);
  att.links["cmp_sparse_indices"] = "indexer/expected/sparse_indices";

  GoldenSpec os = member_spec("attn_out", "attn.v4_out", "v4_out.tokens");
  os.dims = {{"T", T}, {"N", sh.N}, {"D", 512}, {"R", sh.R}, {"dim", sh.dim}};
  os.attrs = {{"o_groups", AttrValue{std::int64_t{8}}}};
  Case out = generate_inputs(os, member_seed(seed, 5), threads);
  out.links["o"] = "sparse_attn/expected/out";
  return {cmp, pro, idx, att, out};
}

}  // namespace

std::vector<Case> build_v4_decode(std::uint64_t seed, int threads) {
  return build(seed, threads, {.ql = {2, 2}, .kvl = {136, 72}, .K = 16, .bs = 16, .hidden = 256, .N = 16, .bs_o = 32, .bs_c = 16, .R = 16, .dim = 256});
}

// V4-Flash at serving size, one decode step of 64 requests (contexts 1K..16K, multiples of 4: every request completes
// one compressed entry): indexer H 64 x D 128 over bs-64 blocks, top-512; attention 64 heads x 512 over the 128-token
// window and the 512 entries; o-projection R 1024 into 4096; the compressor over the 4096-wide hidden state.
std::vector<Case> build_v4_decode_serving(std::uint64_t seed, int threads) {
  V4DecodeShape sh{.ql = {}, .kvl = {}, .K = 512, .bs = 64, .hidden = 4096, .N = 64, .bs_o = 128, .bs_c = 64, .R = 1024, .dim = 4096};
  for (std::int64_t b = 0; b < 64; ++b) sh.ql.push_back(1), sh.kvl.push_back(1024 + (b * 2371 % 61) * 256);
  return build(seed, threads, sh);
}

}  // namespace dsa::golden::layers
