// attn.sparse_mla_decode: input generator and golden catalogue rows (docs/golden.md).
#include <cstring>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/index_rows.hpp"
#include "stages/attn/sparse_mla_decode/stage.hpp"
#include "engines/kv_cache/mla_records.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::sparse_mla_decode {

using golden::Generator;
using golden::GoldenSpec;
using golden::S;
using L = layouts::MlaKCache;

namespace {

enum Stream : std::uint64_t { kQ = 1, kKv = 2, kExtra = 3 };

// One cache of P pages of ps tokens written by the mla.kcache_store reference (writer: 0 pow2, 1 amax/448, 2 ue8m0;
// MODEL1: pow2 / ue8m0 only), every slot a token, from stream `k`.
Tensor write_cache(const GoldenSpec& s, const Rng& k, bool m1, std::int64_t P, std::int64_t ps) {
  using M = layouts::Model1KCache;
  const std::int64_t rec = m1 ? M::kRecord : L::kRecord, nope = m1 ? M::kNope : L::kNope, tile = m1 ? M::kTile : L::kTile;
  const std::int64_t tiles = m1 ? M::kTiles : L::kTiles, cap = P * ps;
  Tensor cache(DType::u8, {P, ps, 1, rec});
  quant::QuantParams q;  // the mla.kcache_store writer's scale rule
  const auto writer = static_cast<int>(s.param("writer", 0));
  q.scale = writer == 1 ? quant::fp32_div_rule(0.0f) : writer == 2 ? quant::ue8m0_rule() : quant::pow2_rule();
  layouts::Model1KCache m1l;
  m1l.page_size = ps;
  std::vector<std::uint16_t> cv(static_cast<std::size_t>(nope)), pe(L::kRope);
  for (std::int64_t t = 0; t < cap; ++t) {
    Rng r = k.fork(static_cast<std::uint64_t>(t));
    for (std::int64_t j = 0; j < tiles; ++j)  // tiles of different magnitude: 2^U{-4..2}
      gen::bf16_normal(r, std::ldexp(s.param("kv_sigma", 1.0), static_cast<int>(r.randint(-4, 2))), tile, cv.data() + j * tile);
    gen::bf16_normal(r, 1.0, L::kRope, pe.data());
    if (m1) engines::kv_cache::store_model1_token(m1l, q, cv.data(), pe.data(), cache.data<std::uint8_t>(), t);
    else engines::kv_cache::store_mla_token(q, cv.data(), pe.data(), cache.data<std::uint8_t>() + t * L::kRecord);
  }
  return cache;
}

// A KV record cache (layouts/kv_records.hpp) of P pages of ps tokens written with the record's producer rule, every
// slot a token: bf16 values N(0, kv_sigma 2^U{-4..2}) per codec block (so the block scales differ), RoPE N(0, 1).
Tensor write_record_cache(const GoldenSpec& s, const Rng& k, const layouts::KvRecord& r, std::int64_t P) {
  const layouts::RecordFormat& f = *r.f;
  Tensor cache(DType::u8, {P, r.page_size, 1, f.record_bytes()});
  const auto q = layouts::producer_quant(f);
  std::vector<std::uint16_t> b(static_cast<std::size_t>(f.dim()));
  std::vector<float> x(static_cast<std::size_t>(f.dim()));
  for (std::int64_t t = 0; t < P * r.page_size; ++t) {
    Rng g = k.fork(static_cast<std::uint64_t>(t));
    for (int j = 0; j < f.nope; j += f.block())
      gen::bf16_normal(g, std::ldexp(s.param("kv_sigma", 1.0), static_cast<int>(g.randint(-4, 2))), f.block(), b.data() + j);
    gen::bf16_normal(g, 1.0, f.rope, b.data() + f.nope);
    for (int d = 0; d < f.dim(); ++d) x[static_cast<std::size_t>(d)] = num::bf16_to_f32(b[static_cast<std::size_t>(d)]);
    layouts::store_record(r, x.data(), t, cache.data<std::uint8_t>(), q);
  }
  return cache;
}

// Every region of every record no counted index selects set to 0xFF bytes (NaN scales and codes in every format).
void poison_unused_records(Tensor& cache, const layouts::KvRecord& r, const std::vector<std::int64_t>& idx,
                           const std::vector<std::int64_t>& len, std::int64_t rows, std::int64_t rows_per_len, std::int64_t K) {
  const std::int64_t cap = cache.dim(0) * cache.dim(1);
  std::vector<char> used(static_cast<std::size_t>(cap), 0);
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t p = 0; p < (len.empty() ? K : len[static_cast<std::size_t>(row / rows_per_len)]); ++p)
      if (idx[static_cast<std::size_t>(row * K + p)] >= 0) used[static_cast<std::size_t>(idx[static_cast<std::size_t>(row * K + p)])] = 1;
  for (std::int64_t t = 0; t < cap; ++t)
    if (!used[static_cast<std::size_t>(t)])
      for (int i = 0; i < r.f->nregions; ++i)
        std::memset(cache.data<std::uint8_t>() + r.region_offset(t, i), 0xFF, static_cast<std::size_t>(r.f->regions[static_cast<std::size_t>(i)].bytes));
}

// Fills every record of `cache` that no counted index selects (and the poison slots) with 0xFF bytes.
void poison_unused(Tensor& cache, bool m1, const std::vector<std::int64_t>& idx, const std::vector<std::int64_t>& len,
                   std::int64_t rows, std::int64_t rows_per_len, std::int64_t K) {
  using M = layouts::Model1KCache;
  const std::int64_t ps = cache.dim(1), cap = cache.dim(0) * ps;
  std::vector<char> used(static_cast<std::size_t>(cap), 0);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t p = 0; p < (len.empty() ? K : len[static_cast<std::size_t>(r / rows_per_len)]); ++p)
      if (idx[static_cast<std::size_t>(r * K + p)] >= 0) used[static_cast<std::size_t>(idx[static_cast<std::size_t>(r * K + p)])] = 1;
  const M m{ps};
  for (std::int64_t t = 0; t < cap; ++t) {
    if (used[static_cast<std::size_t>(t)]) continue;
    if (!m1) {
      std::memset(cache.data<std::uint8_t>() + t * L::kRecord, 0xFF, L::kRecord);
      continue;
    }
    std::memset(cache.data<std::uint8_t>() + m.token_offset(t), 0xFF, M::kToken);
    std::memset(cache.data<std::uint8_t>() + m.scale_offset(t), 0xFF, M::kScaleRec);
  }
}

// Index rows over a cache's slots, skipping slots 0 and 63 when poisoning (slot 0 = "-1 read as token 0", block 0
// token 63 = the address SM90 reads for -1 before zeroing it).
std::vector<std::int64_t> slot_rows(const GoldenSpec& s, const Rng& root, std::int64_t rows, std::int64_t K, std::int64_t cap, bool poison) {
  std::vector<std::int64_t> cand;
  for (std::int64_t t = 0; t < cap; ++t)
    if (!poison || (t != 0 && t != 63)) cand.push_back(t);
  auto idx = gen::index_rows(s, root, rows, K, static_cast<std::int64_t>(cand.size()), cap);
  for (auto& v : idx)
    if (v >= 0) v = cand[static_cast<std::size_t>(v)];
  return idx;
}

// attr layout model1_fp8_584: d_qk 512, the MODEL1 cache; dims XK > 0 add the extra scope (XP pages of xps tokens).
void gen_decode(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  auto lay = s.attrs.find("layout");
  const bool m1 = lay != s.attrs.end() && std::get<std::string>(lay->second) == layouts::Model1KCache::kName;
  const layouts::RecordFormat* rf = lay != s.attrs.end() ? layouts::find_record(std::get<std::string>(lay->second)) : nullptr;
  auto xlay = s.attrs.find("extra_layout");
  const layouts::RecordFormat* xf = xlay != s.attrs.end() ? layouts::find_record(std::get<std::string>(xlay->second)) : rf;
  auto ord = s.attrs.find("record_order");
  const layouts::RecordOrder order = ord != s.attrs.end() && std::get<std::string>(ord->second) == "token_interleaved"
                                         ? layouts::RecordOrder::token_interleaved : layouts::RecordOrder::page_segregated;
  const std::int64_t B = s.dim("B", 2), Sq = s.dim("S", 2), H = s.dim("H", 16), P = s.dim("P", 4), K = s.dim("K", 128);
  const std::int64_t ps = s.dim("ps", s.model.page_size), cap = P * ps, D = rf ? rf->dim() : m1 ? 512 : 576;
  const std::int64_t XK = s.dim("XK", 0), XP = s.dim("XP", 2), xps = s.dim("xps", 64);
  const bool poison = s.param("poison_unused", 0) != 0;
  Tensor q(DType::bf16, {B, Sq, H, D});
  {
    const Rng b = root.fork(kQ);
    for (std::int64_t i = 0; i < B * Sq * H; ++i) {
      Rng r = b.fork(static_cast<std::uint64_t>(i));
      gen::bf16_normal(r, s.param("q_sigma", 1.0), D, q.data<std::uint16_t>() + i * D);
    }
  }
  const layouts::KvRecord kr{rf, order, ps};
  Tensor cache = rf ? write_record_cache(s, root.fork(kKv), kr, P) : write_cache(s, root.fork(kKv), m1, P, ps);
  const auto idx = slot_rows(s, root, B * Sq, K, cap, poison);
  const auto len = gen::topk_lengths(s, root, B, K);
  if (poison && rf) poison_unused_records(cache, kr, idx, len, B * Sq, Sq, K);
  else if (poison) poison_unused(cache, m1, idx, len, B * Sq, Sq, K);
  c.inputs = {{"q", q}, {"k_cache", cache}, {"indices", gen::to_tensor(idx, {B, Sq, K})}};
  if (!len.empty()) c.inputs["topk_length"] = gen::to_tensor(len, {B});
  if (XK > 0) {
    const Rng xr = root.fork(kExtra);
    const layouts::KvRecord xkr{xf, order, xps};
    Tensor xc = xf ? write_record_cache(s, xr.fork(kKv), xkr, XP) : write_cache(s, xr.fork(kKv), m1, XP, xps);
    const auto xi = slot_rows(s, xr, B * Sq, XK, XP * xps, poison);
    const auto xl = gen::topk_lengths(s, xr, B, XK);
    if (poison && xf) poison_unused_records(xc, xkr, xi, xl, B * Sq, Sq, XK);
    else if (poison) poison_unused(xc, m1, xi, xl, B * Sq, Sq, XK);
    c.inputs["extra_k_cache"] = xc;
    c.inputs["extra_indices_in_kvcache"] = gen::to_tensor(xi, {B, Sq, XK});
    if (!xl.empty()) c.inputs["extra_topk_length"] = gen::to_tensor(xl, {B});
  }
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
           "sink, topk_length as in sparse_prefill.random; attr layout model1_fp8_584: d_qk 512 and the MODEL1 cache (7 "
           "e8m0 tiles of 64); attr layout = a kv record (extra_layout, record_order): caches written by the record's producer "
           "rule from bf16 blocks N(0, kv_sigma 2^U{-4..2}), unselected records all 0xFF; XK > 0: an extra scope (XP pages "
           "of xps tokens, XK indices per row, its own topk_length). dims B, S, H, P, ps, K, XP, xps, XK",
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
      {.name = "mla_decode_v32_b256", .stage = st, .generator = g, .seed = 808,
       .dims = {{"B", 256}, {"S", 2}, {"H", 128}, {"P", 64}, {"K", 2048}},
       .params = {{"invalid_frac", 0.0}}, .attrs = {{"softmax_scale", mla_scale}},
       .committed = false,
       .doc = "a 256-request V3.2 decode step with MTP (b 256, s_q 2, h_q 128, topk 2048: 146 G multiply-adds; the GPU "
              "benchmark, scripts/gpu_bench.sh attn)"},
      // Shapes FlashMLA's SM90 sparse decode itself accepts (h_q 64 or 128; the h_q 16 cases above are for the
      // reference and for kernels that take any h_q): a kernel test can feed these goldens to the real kernel.
      {.name = "mla_decode_v32_hq64", .stage = st, .generator = g, .seed = 807,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 1}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}, {"lonely_every", 2}},
       .attrs = {{"softmax_scale", mla_scale}},
       .doc = "V3.2 decode at a shape FlashMLA runs (h_q 64, s_q 1, topk 64, one 64-token block of the 656-byte pow2 "
              "cache, MLA scale), a lonely row (lse +inf); MODEL1 decode at h_q 64: mla_decode_model1_*"},
      {.name = "mla_decode_model1_extra", .stage = st, .generator = g, .seed = 805,
       .dims = {{"B", 2}, {"S", 2}, {"H", 64}, {"P", 2}, {"ps", 256}, {"K", 128}, {"XP", 4}, {"xps", 64}, {"XK", 128}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("model1_fp8_584")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "DeepSeek-V4 (FlashMLA MODEL1, as its tests): d_qk 512, main scope topk 128 over 256-token blocks, extra scope "
              "128 over 64-token blocks in the same softmax, topk_length and extra_topk_length (0 and full included), sinks "
              "at +-95, NaN records behind every unselected slot and lane"},
      {.name = "mla_decode_model1_short_blocks", .stage = st, .generator = g, .seed = 806,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"K", 64}, {"XP", 64}, {"xps", 2}, {"XK", 64}},
       .params = {{"invalid_frac", 0.2}, {"lonely_every", 3}, {"writer", 2}},
       .attrs = {{"layout", S("model1_fp8_584")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .poison = {{"q", 1, 3, golden::kNaN}},
       .doc = "MODEL1 with 2-token extra blocks (FlashMLA's extra block_size 2), ue8m0 scales, a lonely row (both scopes "
              "empty: out 0, lse +inf); NaN policy: a NaN in q (batch 1 head 0)"},
      // DeepSeek-V4.1 / FP4 kv records (layouts/kv_records.hpp): keys dequantized exactly from the records
      {.name = "mla_decode_v41_fp4_extra", .stage = st, .generator = g, .seed = 811,
       .dims = {{"B", 2}, {"S", 2}, {"H", 64}, {"P", 2}, {"ps", 64}, {"K", 64}, {"XP", 2}, {"xps", 64}, {"XK", 64}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"extra_layout", S("v41_nvfp4_288")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "DeepSeek-V4.1 decode with FlashMLA's (V41, V41_FP4) pair: the window KV in 528-byte MXFP8 records, the "
              "compressed KV in 288-byte NVFP4 records (page_segregated), one softmax, sinks, topk_length, 0xFF records "
              "behind every unselected slot"},
      {.name = "mla_decode_v41_pair_interleaved", .stage = st, .generator = g, .seed = 812,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"ps", 32}, {"K", 64}, {"XP", 2}, {"xps", 32}, {"XK", 64}},
       .params = {{"invalid_frac", 0.2}, {"lonely_every", 3}, {"poison_unused", 1}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"record_order", S("token_interleaved")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "the (V41, V41) pair in per-token interleaved records (the later FlashMLA layout a third-party study "
              "describes), 32-token pages, a lonely row"},
      {.name = "mla_decode_sglang_mxfp4_368", .stage = st, .generator = g, .seed = 813,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"ps", 64}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("sglang_mxfp4_368")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "sglang's V4 SM90 MXFP4 cache read: e2m1 x 2^(byte-127) NoPE, bf16 RoPE"},
      {.name = "mla_decode_flashmla_nvfp4_352", .stage = st, .generator = g, .seed = 814,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"ps", 64}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("flashmla_nvfp4_352")}, {"softmax_scale", mla_scale}},
       .doc = "vLLM FlashMLA #18's V3.2 NVFP4 cache (d_qk 576): e2m1 x e4m3 NoPE with 4x8-interleaved scales, unscaled "
              "e4m3 RoPE"},
      {.name = "mla_decode_nvfp4_384", .stage = st, .generator = g, .seed = 815,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"ps", 64}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("nvfp4_384")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "FlashInfer's sparse-MLA nvfp4 page (sglang V4 on SM120): data rows then scale rows"},
  };
}

}  // namespace dsa::attn::sparse_mla_decode
