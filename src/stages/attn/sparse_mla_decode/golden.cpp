// attn.sparse_mla_decode: input generator and golden catalogue rows (README "Golden data").
#include <cstring>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stages/attn/common/gen.hpp"
#include "stages/attn/sparse_mla_decode/core.hpp"
#include "stages/mla/kcache_store/core.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::sparse_mla_decode {

using golden::Generator;
using golden::GoldenSpec;
using golden::S;
using L = layouts::MlaKCache;

namespace {

enum Stream : std::uint64_t { kQ = 1, kKv = 2 };

// The cache is written by the mla.kcache_store reference (writer: 0 pow2, 1 amax/448, 2 ue8m0), every slot a token.
void gen_decode(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t B = s.dim("B", 2), Sq = s.dim("S", 2), H = s.dim("H", 16), P = s.dim("P", 4), K = s.dim("K", 128);
  const std::int64_t ps = s.model.page_size, cap = P * ps;
  const bool poison = s.param("poison_unused", 0) != 0;
  Tensor q(DType::bf16, {B, Sq, H, 576}), cache(DType::u8, {P, ps, 1, L::kRecord});
  {
    const Rng b = root.fork(kQ);
    for (std::int64_t i = 0; i < B * Sq * H; ++i) {
      Rng r = b.fork(static_cast<std::uint64_t>(i));
      gen::bf16_normal(r, s.param("q_sigma", 1.0), 576, q.data<std::uint16_t>() + i * 576);
    }
    mla::kcache_store::Params wp;
    const auto writer = static_cast<int>(s.param("writer", 0));
    wp.quant.fmt = writer == 1 ? indexer::ScaleFmt::fp32_floor : writer == 2 ? indexer::ScaleFmt::ue8m0 : indexer::ScaleFmt::pow2_div;
    wp.quant.amax_eps = writer == 1 ? 0.0f : 1e-4f;
    const Rng k = root.fork(kKv);
    std::vector<std::uint16_t> cv(L::kNope), pe(L::kRope);
    for (std::int64_t t = 0; t < cap; ++t) {
      Rng r = k.fork(static_cast<std::uint64_t>(t));
      for (std::int64_t j = 0; j < L::kTiles; ++j)  // tiles of different magnitude: 2^U{-4..2}
        gen::bf16_normal(r, std::ldexp(s.param("kv_sigma", 1.0), static_cast<int>(r.randint(-4, 2))), L::kTile, cv.data() + j * L::kTile);
      gen::bf16_normal(r, 1.0, L::kRope, pe.data());
      mla::kcache_store::store_token(wp, cv.data(), pe.data(), cache.data<std::uint8_t>() + t * L::kRecord);
    }
  }
  // Candidates: every slot but 0 and 63 when poisoning (slot 0 = "-1 read as token 0", block 0 token 63 = the
  // address SM90 reads for -1 before zeroing it): those and every unselected record hold 0xFF bytes (NaN codes,
  // NaN scales, NaN rope).
  std::vector<std::int64_t> cand;
  for (std::int64_t t = 0; t < cap; ++t)
    if (!poison || (t != 0 && t != 63)) cand.push_back(t);
  auto idx = gen::index_rows(s, root, B * Sq, K, static_cast<std::int64_t>(cand.size()), cap);
  for (auto& v : idx)
    if (v >= 0) v = cand[static_cast<std::size_t>(v)];
  const auto len = gen::topk_lengths(s, root, B, K);
  if (poison) {
    std::vector<char> used(static_cast<std::size_t>(cap), 0);
    for (std::int64_t r = 0; r < B * Sq; ++r)
      for (std::int64_t p = 0; p < (len.empty() ? K : len[static_cast<std::size_t>(r / Sq)]); ++p)
        if (idx[static_cast<std::size_t>(r * K + p)] >= 0) used[static_cast<std::size_t>(idx[static_cast<std::size_t>(r * K + p)])] = 1;
    for (std::int64_t t = 0; t < cap; ++t)
      if (!used[static_cast<std::size_t>(t)]) std::memset(cache.data<std::uint8_t>() + t * L::kRecord, 0xFF, L::kRecord);
  }
  c.inputs = {{"q", q}, {"k_cache", cache}, {"indices", gen::to_tensor(idx, {B, Sq, K})}};
  if (!len.empty()) c.inputs["topk_length"] = gen::to_tensor(len, {B});
  Tensor sink;
  if (gen::sinks(s, root, H, sink)) c.inputs["attn_sink"] = sink;
}

}  // namespace

std::vector<Generator> generators() {
  return {{"sparse_decode.random", "attn.sparse_mla_decode",
           "q bf16 N(0, q_sigma) [B,S,H,576]; a P-page 656-byte cache written by the mla.kcache_store reference (writer 0 "
           "pow2, 1 amax/448 non-pow2, 2 ue8m0) from c tiles N(0, kv_sigma 2^U{-4..2}) and k_pe N(0,1); indices [B,S,K] "
           "over the cache slots with invalid_frac -1, dup_frac repeats, lonely_every rows all -1, leading_invalid 64-wide "
           "leading -1 chunks (B32); poison_unused: slot 0, block 0 token 63 and every unselected record 0xFF (NaN, B34); "
           "sink, topk_length as in sparse_prefill.random. dims B, S, H, P, K",
           gen_decode}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "attn.sparse_mla_decode";
  const char* g = "sparse_decode.random";
  const AttrValue mla_scale{0.1352337788608801};
  return {
      {.name = "mla_decode_v32_mtp", .stage = st, .generator = g, .seed = 801,
       .dims = {{"B", 2}, {"S", 2}, {"H", 16}, {"P", 4}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"lonely_every", 3}, {"leading_invalid", 1}, {"poison_unused", 1}},
       .attrs = {{"softmax_scale", mla_scale}},
       .doc = "V3.2 decode with MTP (s_q 2), pow2 cache, MLA scale: leading -1 chunks (B32), a lonely row (lse +inf), NaN "
              "in slot 0, in the -1 dummy slot (block 0 token 63) and in every unselected record (B34)"},
      {.name = "mla_decode_nonpow2_scales", .stage = st, .generator = g, .seed = 802,
       .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 3}, {"K", 128}},
       .params = {{"invalid_frac", 0.05}, {"writer", 1}, {"dup_frac", 0.03}}, .poison = {{"q", 1, 7, golden::kNaN}},
       .doc = "amax/448 (non-pow2) cache scales read by the SM90 dequant bf16(bf16(fp8)*bf16(scale)) (B25), default "
              "softmax_scale 576^-0.5, duplicate indices; NaN policy: a NaN in q (batch 1 head 0) makes that head's out "
              "and lse NaN (code 0x7FFF / 0x7FFFFFFF)"},
      {.name = "mla_decode_sinks_topk_length", .stage = st, .generator = g, .seed = 803,
       .dims = {{"B", 3}, {"S", 2}, {"H", 16}, {"P", 4}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}, {"poison_unused", 1}, {"writer", 2}},
       .attrs = {{"softmax_scale", mla_scale}},
       .doc = "FlashMLA @HEAD: attn_sink (heads at +-95, B35), topk_length per batch 0 / topk / random with NaN records "
              "behind lanes >= topk_length (B34), ue8m0 cache"},
      {.name = "mla_decode_v32_full", .stage = st, .generator = g, .seed = 804,
       .dims = {{"B", 64}, {"S", 2}, {"H", 128}, {"P", 64}, {"K", 2048}},
       .params = {{"invalid_frac", 0.0}}, .attrs = {{"softmax_scale", mla_scale}},
       .committed = false,
       .doc = "the benchmark shape: b 64, s_q 2, h_q 128, topk 2048 (scripts/bench.sh)"},
  };
}

}  // namespace dsa::attn::sparse_mla_decode
