// attn.sparse_mla_prefill: input generator and golden catalogue rows (docs/golden.md).
#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/index_rows.hpp"
#include "stages/attn/sparse_mla_prefill/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::sparse_mla_prefill {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::kNaN;
using golden::S;

namespace {

enum Stream : std::uint64_t { kQ = 1, kKv = 2 };

void gen_prefill(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t Sq = s.dim("S", 4), H = s.dim("H", 16), N = s.dim("N", 192), K = s.dim("K", 128), D = s.dim("D", 576);
  const bool poison = s.param("poison_unused", 0) != 0;
  if (N < 2) throw std::invalid_argument(s.name + ": N must be >= 2");
  Tensor q(DType::bf16, {Sq, H, D}), kv(DType::bf16, {N, 1, D});
  {
    const Rng b = root.fork(kQ);
    for (std::int64_t i = 0; i < Sq * H; ++i) {
      Rng r = b.fork(static_cast<std::uint64_t>(i));
      gen::bf16_normal(r, s.param("q_sigma", 1.0), D, q.data<std::uint16_t>() + i * D);
    }
    const Rng k = root.fork(kKv);
    for (std::int64_t t = 0; t < N; ++t) {
      Rng r = k.fork(static_cast<std::uint64_t>(t));
      gen::bf16_normal(r, s.param("kv_sigma", 1.0), D, kv.data<std::uint16_t>() + t * D);
    }
    if (s.param("tie", 0) != 0)  // key 2k+1 = key 2k: exact score ties between distinct indices
      for (std::int64_t t = 1; t < N; t += 2)
        std::copy_n(kv.data<std::uint16_t>() + (t - 1) * D, D, kv.data<std::uint16_t>() + t * D);
  }
  // Candidates 1..N-1 when poisoning (row 0 is what a -1 read as 0 would hit: it must stay unused and NaN).
  const std::int64_t first = poison ? 1 : 0;
  auto idx = gen::index_rows(s, root, Sq, K, N - first, N);
  for (auto& v : idx)
    if (v >= 0 && v < N - first) v += first;
  const auto len = gen::topk_lengths(s, root, Sq, K);
  if (poison) {  // every kv row no counted position selects: NaN (FlashMLA's tests poison unused KV the same way)
    std::vector<char> used(static_cast<std::size_t>(N), 0);
    for (std::int64_t i = 0; i < Sq; ++i)
      for (std::int64_t p = 0; p < (len.empty() ? K : len[static_cast<std::size_t>(i)]); ++p) {
        const auto v = idx[static_cast<std::size_t>(i * K + p)];
        if (v >= 0 && v < N) used[static_cast<std::size_t>(v)] = 1;
      }
    for (std::int64_t t = 0; t < N; ++t)
      if (!used[static_cast<std::size_t>(t)]) std::fill_n(kv.data<std::uint16_t>() + t * D, D, std::uint16_t{0x7FC0});
  }
  c.inputs = {{"q", q}, {"kv", kv}, {"indices", gen::to_tensor(idx, {Sq, 1, K})}};
  if (!len.empty()) c.inputs["topk_length"] = gen::to_tensor(len, {Sq});
  Tensor sink;
  if (gen::sinks(s, root, H, sink)) c.inputs["attn_sink"] = sink;
}

}  // namespace

std::vector<Generator> generators() {
  return {{"sparse_prefill.random", "attn.sparse_mla_prefill",
           "q, kv bf16 N(0, q_sigma / kv_sigma) over d_qk = D dims; indices [S,1,K] over [0,N) with invalid_frac -1, oob_frac "
           ">= N, dup_frac repeats, every lonely_every-th row all invalid, leading_invalid: 64-wide leading -1 chunks "
           "(B32); tie: key 2k+1 = key 2k; poison_unused: unselected kv rows (row 0 always) NaN (B34); sink > 0: attn_sink "
           "N(0, sink) with heads 0/1 at +-sink_large; topk_length: random lengths incl. 0 and K. dims S, H, N, K, D",
           gen_prefill}};
}

// The V3.2 MLA scale serving passes to flash_mla_sparse_fwd: 192^-0.5 * mscale^2 (the attr has no default).
constexpr double kMlaScale = 0.1352337788608801;

std::vector<GoldenSpec> goldens() {
  const char* st = "attn.sparse_mla_prefill";
  const char* g = "sparse_prefill.random";
  return {
      {.name = "mla_prefill_v32", .stage = st, .generator = g, .seed = 701,
       .dims = {{"S", 4}, {"H", 16}, {"N", 192}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"dup_frac", 0.02}, {"lonely_every", 4}, {"leading_invalid", 1}, {"poison_unused", 1}},
       .attrs = {{"softmax_scale", kMlaScale}},
       .doc = "V3.2 prefill (d_qk 576, MLA scale, natural lse): leading -1 chunks (B32), duplicates, a lonely row (lse +inf), "
              "NaN in every unselected kv row and row 0 (B34)"},
      {.name = "mla_prefill_2025_base2", .stage = st, .generator = g, .seed = 702,
       .dims = {{"S", 4}, {"H", 16}, {"N", 160}, {"K", 128}},
       .params = {{"invalid_frac", 0.05}, {"oob_frac", 0.1}, {"lonely_every", 4}},
       .attrs = {{"lse_base", S("2")}, {"softmax_scale", kMlaScale}},
       .doc = "the 2025 release: log2 max_logits/lse, lonely rows lse -inf; indices >= s_kv are invalid and must be masked"},
      {.name = "mla_prefill_sinks_topk_length", .stage = st, .generator = g, .seed = 703,
       .dims = {{"S", 5}, {"H", 16}, {"N", 192}, {"K", 128}, {"D", 512}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}, {"poison_unused", 1}},
       .attrs = {{"softmax_scale", kMlaScale}},
       .doc = "FlashMLA @HEAD: d_qk 512, attn_sink (heads at +-95, B35), topk_length 0 and = topk, NaN behind lanes >= "
              "topk_length (B34)"},
      // Shapes FlashMLA's SM90 sparse prefill itself accepts (h_q 64 or 128).
      {.name = "mla_prefill_v32_hq64", .stage = st, .generator = g, .seed = 706,
       .dims = {{"S", 2}, {"H", 64}, {"N", 64}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}},
       .attrs = {{"softmax_scale", kMlaScale}},
       .doc = "V3.2 prefill at a shape FlashMLA runs (h_q 64, d_qk 576, topk 64, MLA scale)"},
      {.name = "mla_prefill_model1_hq64", .stage = st, .generator = g, .seed = 707,
       .dims = {{"S", 2}, {"H", 64}, {"N", 64}, {"K", 64}, {"D", 512}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}},
       .attrs = {{"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "DeepSeek-V4 prefill at a shape FlashMLA runs (h_q 64, d_qk 512, attn_sink, topk_length)"},
      {.name = "mla_prefill_ties_nonfinite", .stage = st, .generator = g, .seed = 704,
       .dims = {{"S", 3}, {"H", 16}, {"N", 128}, {"K", 128}},
       .params = {{"invalid_frac", 0.2}, {"tie", 1}, {"q_sigma", 4.0}}, .attrs = {{"softmax_scale", 0.0883883476483184}},
       .poison = {{"q", 1, 5, kNaN}},
       .doc = "exact score ties (duplicate key contents), peaked softmax (q x4), non-pow2 softmax_scale 128^-0.5; a NaN in q row 1 "
              "head 0: that head's out and lse are NaN"},
      {.name = "mla_prefill_v32_full", .stage = st, .generator = g, .seed = 705,
       .dims = {{"S", 64}, {"H", 128}, {"N", 8192}, {"K", 2048}},
       .params = {{"invalid_frac", 0.02}, {"lonely_every", 32}}, .attrs = {{"softmax_scale", kMlaScale}},
       .committed = false,
       .doc = "V3.2 shapes: s_q 64, h_q 128, topk 2048 over 8192 keys"},
      {.name = "mla_prefill_v32_8k", .stage = st, .generator = g, .seed = 708,
       .dims = {{"S", 8192}, {"H", 128}, {"N", 8192}, {"K", 2048}},
       .params = {{"invalid_frac", 0.02}, {"lonely_every", 1024}}, .attrs = {{"softmax_scale", kMlaScale}},
       .committed = false,
       .doc = "an 8K-token V3.2 prefill (s_q 8192, h_q 128, topk 2048 over 8192 keys: 2.3 T multiply-adds of QK + PV; "
              "2.2 GB; the GPU benchmark, scripts/gpu_bench.sh attn)"},
  };
}

}  // namespace dsa::attn::sparse_mla_prefill
