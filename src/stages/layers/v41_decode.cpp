// Layer recipe layer_v41_decode (table.cpp).
#include <algorithm>
#include <cmath>

#include "layouts/kv_records.hpp"
#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "numerics/rope.hpp"
#include "stages/layers/recipe.hpp"
#include "stages/v41/logits/stage.hpp"

namespace dsa::golden::layers {

// DeepSeek-V4.1 decode across a candidate source layer and a consumer layer (spec v41 §1, §5: layer 20 is KV source,
// index source and candidate source at compress ratio 1; layer 24 an index source choosing inside layer 20's
// published blocks and reading layer 20's K cache), two requests of 70 and 30 tokens, one new token each, vLLM's
// CUDA path with DeepGEMM 2.8's FP4 logits:
//   src_indexer_k   layer 20's K store: k_norm, RoPE, MXFP4 into the 68-byte indexer K cache (128-slot pages)
//   src_q           layer 20's MXFP4 q path (32 heads, weights folded by 2^-6)
//   src_logits      its FP4 logits over every block of each sequence (paged sparse kernel, the list all blocks)
//   src_select      top-16 and the published top-4 blocks of 8 positions (the newest pinned)
//   dst_q           layer 24's MXFP4 q path (its own projections)
//   dst_logits      layer 24's sparse logits over the published blocks, on layer 20's K cache (the reuse)
//   dst_select      layer 24's top-16 inside the published blocks, straight from the sparse logits' columns
std::vector<Case> build_v41_decode(std::uint64_t seed, int threads) {
  const std::vector<std::int64_t> L{70, 30};
  const std::int64_t B = 2, ps = 128, H = 32, k = 16, bsz = 8, pub = 4, nblk = 1 + B, maxL = 70;
  const std::int64_t nsb = 12;  // every block of the longer sequence (9), padded to a multiple of 4
  Tensor bt = Tensor::from_vector(DType::i32, {B, 1}, std::vector<std::int32_t>{2, 1});  // page 0: the null page
  Tensor ctx = Tensor::from_vector(DType::i32, {B}, std::vector<std::int32_t>{70, 30});
  std::vector<std::int64_t> last;
  for (auto l : L) last.push_back(l - 1);
  // The K cache before the step: every slot an MXFP4 record of N(0, 1) * 2^U{-4..4} values (the earlier tokens').
  Tensor hist(DType::u8, {nblk, ps, 68});
  v41::logits::fill_random_k_cache(hist.data<std::uint8_t>(), nblk * ps, ps, Rng(member_seed(seed, 9)));
  Tensor cs(DType::f32, {maxL, 64});
  num::v4_cos_sin_cache(64, maxL, cs.data<float>());
  Tensor positions64 = Tensor::from_vector(DType::i64, {B}, last);

  Case sk = bare_case("src_indexer_k", "v41.indexer_k");
  {
    Tensor kp(DType::bf16, {B, 128}), w(DType::bf16, {128});
    Rng g(member_seed(seed, 1));
    for (std::int64_t i = 0; i < B * 128; ++i) kp.data<std::uint16_t>()[i] = num::f64_to_bf16(g.normal());
    for (std::int64_t i = 0; i < 128; ++i) w.data<std::uint16_t>()[i] = num::f64_to_bf16(1.0 + 0.1 * g.normal());
    std::vector<std::int64_t> sm;
    for (std::int64_t b = 0; b < B; ++b) sm.push_back(std::int64_t{bt.data<std::int32_t>()[b]} * ps + last[static_cast<std::size_t>(b)] % ps);
    sk.inputs = {{"k_pre", kp}, {"positions", positions64}, {"cos_sin_cache", cs}, {"norm_weight", w},
                 {"kv_slot_mapping", Tensor::from_vector(DType::i64, {B}, sm)}, {"k_cache_in", hist}};
    sk.attrs = {{"cmp_ratio", AttrValue{std::int64_t{1}}}};
  }
  auto q_member = [&](const char* name, std::uint64_t member) {
    GoldenSpec s = member_spec(name, "v4.indexer_prolog", "v4ip.vllm_q");
    s.dims = {{"T", B}, {"H", H}, {"P", maxL}};
    s.attrs = {{"kernel", AttrValue{std::string("vllm-cuda")}}, {"q_format", AttrValue{std::string("mxfp4")}}};
    Case q = generate_inputs(s, member_seed(seed, member), threads);
    q.name = name;
    q.inputs["positions"] = positions64;
    q.inputs["cos_sin_cache"] = cs;
    return q;
  };
  Case sq = q_member("src_q", 2);
  auto logits_member = [&](const char* name, const char* q, Tensor blocks) {
    Case l = bare_case(name, "v41.logits");
    l.inputs = {{"context_lens", ctx}, {"block_table", bt}, {"sparse_blocks", std::move(blocks)}};
    l.links = {{"q_fp4", std::string(q) + "/expected/q_fp4"}, {"q_sf", std::string(q) + "/expected/q_fp4_scale"},
               {"weights", std::string(q) + "/expected/weights_out"}, {"kv_cache", "src_indexer_k/expected/k_cache"}};
    return l;
  };
  Tensor all(DType::i32, {B, nsb});
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < nsb; ++i)
      all.data<std::int32_t>()[b * nsb + i] = i * bsz < L[static_cast<std::size_t>(b)] ? static_cast<std::int32_t>(i) : -1;
  Case sl = logits_member("src_logits", "src_q", all);
  Tensor positions32 = Tensor::from_vector(DType::i32, {B}, std::vector<std::int32_t>{69, 29});
  Case ss = bare_case("src_select", "v41.select");
  ss.inputs = {{"positions", positions32}};
  ss.attrs = {{"k", AttrValue{k}}, {"topk_blocks", AttrValue{pub}}, {"publish", AttrValue{std::int64_t{1}}}};
  ss.links = {{"scores", "src_logits/expected/logits"}};
  Case dq = q_member("dst_q", 3);
  Case dl = logits_member("dst_logits", "dst_q", Tensor(DType::i32, {B, pub}));
  dl.links["sparse_blocks"] = "src_select/expected/published_blocks";
  Case ds = bare_case("dst_select", "v41.select");
  ds.inputs = {{"positions", positions32}};
  ds.attrs = {{"k", AttrValue{k}}, {"scores_layout", AttrValue{std::string("candidates")}}};
  ds.links = {{"scores", "dst_logits/expected/logits"}, {"candidate_blocks", "src_select/expected/published_blocks"}};
  return {sk, sq, sl, ss, dq, dl, ds};
}

}  // namespace dsa::golden::layers
