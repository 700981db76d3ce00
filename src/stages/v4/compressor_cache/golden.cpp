// v4.compressor_cache: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "layouts/mla_kcache.hpp"
#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "numerics/rope.hpp"
#include "stages/v4/compressor_cache/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::compressor_cache {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;

namespace {

enum Stream : std::uint64_t { kKV = 1, kApe, kGamma, kPerm, kKPerm, kCanary, kPad };

std::int64_t attr_i(const GoldenSpec& s, const char* k, std::int64_t def) {
  auto it = s.attrs.find(k);
  return it == s.attrs.end() ? def : std::get<std::int64_t>(it->second);
}

// dims D, sbs, kbs, cap (positions per request the tables cover; default the step's last position + 1); lists
// start_pos, q_len; params pads (pad tokens at the end), data_seed (the weights, kv_score rows and tables: one
// history shared by the steps of a chain), null_blocks (state table entries before every row the step reads = 0,
// vLLM's null block), kv_minus1 (the last request's first emitting token gets kv slot -1), bf16_values (kv_score
// and ape values with 8 significant bits: the committed file half as large; the pooled sums stay full fp32).
void gen_step(const GoldenSpec& s, std::uint64_t seed, int, Case& c) {
  const std::int64_t D = s.dim("D", 128), sbs = s.dim("sbs", 4), kbs = s.dim("kbs", 8), rope = 64;
  const std::int64_t r = attr_i(s, "cmp_ratio", 4), coff = r == 4 ? 2 : 1, C2 = coff * D, W = 2 * C2;
  const auto& s0 = s.list("start_pos");
  const auto& ql = s.list("q_len");
  const std::int64_t B = static_cast<std::int64_t>(s0.size()), pads = static_cast<std::int64_t>(s.param("pads", 2));
  std::int64_t cap = 1, T = pads;
  for (std::int64_t b = 0; b < B; ++b) cap = std::max(cap, s0[b] + ql[b]), T += ql[b];
  cap = s.dim("cap", cap);
  const double ds = s.param("data_seed", -1);
  const Rng root(ds >= 0 ? static_cast<std::uint64_t>(ds) : seed), step(seed);
  auto bf = [](double v) { return num::f64_to_bf16(v); };
  const bool short_values = s.param("bf16_values", 0) != 0;  // 8 significant bits: about half the golden's bytes
  auto val = [&](double v) { return short_values ? num::round_to_bf16(static_cast<float>(v)) : static_cast<float>(v); };
  Tensor ape(DType::f32, {r, C2}), gamma(DType::bf16, {D});
  {
    Rng e = root.fork(kApe), n = root.fork(kGamma);
    for (std::int64_t i = 0; i < r * C2; ++i) ape.data<float>()[i] = val(0.5 * e.normal());
    for (std::int64_t i = 0; i < D; ++i) gamma.data<std::uint16_t>()[i] = bf(1.0 + 0.1 * n.normal());
  }
  auto kvrow = [&](std::int64_t b, std::int64_t p, float* dst) {  // kv_score of request b at position p
    Rng rr = root.fork(kKV).fork(static_cast<std::uint64_t>(b)).fork(static_cast<std::uint64_t>(p));
    for (std::int64_t o = 0; o < W; ++o) dst[o] = val(rr.normal());
  };
  // State table: per request ceil(cap / sbs) distinct shuffled block ids >= 1 (0 = vLLM's null block).
  auto table = [&](std::int64_t per, Stream st, std::int64_t& nb) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(B * per));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>(i) + 1;
    Rng pr = root.fork(st);
    for (std::int64_t i = static_cast<std::int64_t>(ids.size()) - 1; i > 0; --i) std::swap(ids[i], ids[pr.randint(0, i)]);
    nb = B * per + 1;
    return ids;
  };
  const std::int64_t per = (cap + sbs - 1) / sbs, kper = ((cap + r - 1) / r + kbs - 1) / kbs;
  std::int64_t nblk = 0, kblk = 0;
  const auto sid = table(per, kPerm, nblk), kid = table(kper, kKPerm, kblk);
  Tensor bt(DType::i32, {B, per});
  const bool nulls = s.param("null_blocks", 0) != 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < per; ++k) {
      const std::int64_t first_read = s0[b] - coff * r + 1;  // the earliest row an emitting token of this step reads
      bt.data<std::int32_t>()[b * per + k] = nulls && (k + 1) * sbs <= first_read ? 0 : static_cast<std::int32_t>(sid[b * per + k]);
    }
  auto sslot = [&](std::int64_t b, std::int64_t p) { return std::int64_t{bt.data<std::int32_t>()[b * per + p / sbs]} * sbs + p % sbs; };
  auto kslot = [&](std::int64_t b, std::int64_t p) {
    const std::int64_t j = p / r;
    return kid[b * kper + j / kbs] * kbs + j % kbs;
  };
  // state_cache_in: NaN everywhere (block 0 included), the rows the step reads as a correct earlier step wrote them.
  Tensor st(DType::f32, {nblk, sbs, W});
  std::fill_n(st.data<float>(), st.numel(), std::numeric_limits<float>::quiet_NaN());
  std::vector<float> row(static_cast<std::size_t>(W));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t p = std::max<std::int64_t>(0, s0[b] - coff * r + 1); p < s0[b]; ++p) {
      kvrow(b, p, row.data());
      float* d = st.data<float>() + sslot(b, p) * W;
      for (std::int64_t o = 0; o < C2; ++o) d[o] = row[o], d[C2 + o] = row[C2 + o] + ape.data<float>()[(p % r) * C2 + o];
    }
  // kv_cache_in: random canary bytes (every byte the step must not write shows a write).
  const std::int64_t rec = D == 512 ? layouts::Model1KCache::kRecord : D + 4;
  Tensor kc(DType::u8, {kblk, kbs, rec});
  {
    Rng cr = step.fork(kCanary);
    for (std::int64_t i = 0; i < kc.numel(); ++i) kc.data<std::uint8_t>()[i] = static_cast<std::uint8_t>(cr.next_u64() >> 56);
  }
  Tensor cs(DType::f32, {cap, rope});
  num::v4_cos_sin_cache(rope, cap, cs.data<float>());
  Tensor ks(DType::f32, {T, W}), pos(DType::i64, {T}), req(DType::i32, {T}), sm(DType::i64, {T}), km(DType::i64, {T});
  std::int64_t t = 0;
  bool minus1 = s.param("kv_minus1", 0) != 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < ql[b]; ++i, ++t) {
      const std::int64_t p = s0[b] + i;
      kvrow(b, p, ks.data<float>() + t * W);
      pos.data<std::int64_t>()[t] = p, req.data<std::int32_t>()[t] = static_cast<std::int32_t>(b);
      sm.data<std::int64_t>()[t] = sslot(b, p);
      std::int64_t k = kslot(b, p);
      if (minus1 && b == B - 1 && (p + 1) % r == 0) k = -1, minus1 = false;
      km.data<std::int64_t>()[t] = k;
    }
  {
    Rng pr = step.fork(kPad);
    for (; t < T; ++t) {  // CUDA-graph pads: slot -1, position 0, request 0, junk projections
      for (std::int64_t o = 0; o < W; ++o) ks.data<float>()[t * W + o] = val(pr.normal());
      pos.data<std::int64_t>()[t] = 0, req.data<std::int32_t>()[t] = 0, sm.data<std::int64_t>()[t] = -1, km.data<std::int64_t>()[t] = -1;
    }
  }
  c.inputs = {{"kv_score", ks}, {"ape", ape}, {"norm_weight", gamma}, {"cos_sin_cache", cs}, {"positions", pos},
              {"token_to_req_indices", req}, {"slot_mapping", sm}, {"block_table", bt}, {"kv_slot_mapping", km},
              {"state_cache_in", st}, {"kv_cache_in", kc}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4cc.step", "v4.compressor_cache",
           "one step of vLLM's CUDA compressor (lists start_pos, q_len per request; dims D 128 | 512, sbs, kbs, cap): "
           "kv_score fp32 N(0,1) per (request, position), ape N(0, 0.25), gamma 1 + N(0, 0.01); state table and KV "
           "table of shuffled distinct ids >= 1 (0 = the null block); state_cache_in NaN except the rows the step "
           "reads (written as a correct earlier step would); kv_cache_in random canary bytes; every token's kv slot "
           "the slot of its entry p / r; params pads (slot -1 tokens at the end), null_blocks, kv_minus1, data_seed "
           "(one history for the steps of a chain), bf16_values (kv_score, ape with 8 significant bits: smaller files); V4 "
           "YaRN cos_sin_cache rows 0 .. cap - 1",
           gen_step}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v4.compressor_cache";
  const char* g = "v4cc.step";
  return {
      {.name = "v4c4_vllm_indexer_cache", .stage = st, .generator = g, .seed = 911, .dims = {{"D", 128}, {"sbs", 4}, {"kbs", 8}},
       .lists = {{"start_pos", {0, 5, 10}}, {"q_len", {9, 4, 2}}}, .params = {{"pads", 3}},
       .attrs = {{"cmp_ratio", I(4)}, {"rotate", I(1)}},
       .doc = "the indexer compressor (D 128, C4) on vLLM CUDA: one ue8m0 block over all 128 RoPE'd dims, fp32 scale "
              "after the block's codes, no Hadamard although rotate = 1; a prefill from 0 (j = 0 masked), mid-group "
              "decodes, pads, canary bytes in every unwritten slot and the null block"},
      {.name = "v4c4_vllm_model1_cache", .stage = st, .generator = g, .seed = 912, .dims = {{"D", 512}, {"sbs", 4}, {"kbs", 4}},
       .lists = {{"start_pos", {3, 11, 30}}, {"q_len", {6, 1, 2}}}, .params = {{"pads", 2}, {"null_blocks", 1}, {"kv_minus1", 1}, {"bf16_values", 1}},
       .attrs = {{"cmp_ratio", I(4)}},
       .poison = {{"kv_score", 5, 7, golden::kNaN}, {"kv_score", 5, 1030, golden::kInf}, {"kv_score", 10, 3, golden::kNaN}},
       .doc = "the main C4 compressor (D 512) into the 584-byte MODEL1 records: 7 ue8m0 nope blocks, bf16 rope dims; "
              "null blocks in the state table before the window, an emitting token with kv slot -1 (no write); NaN "
              "policy: a NaN kv and a +inf score of a token saved but read by no entry of the step (p 8) are copied "
              "into its state row, a NaN in a pad token's row is never read"},
      {.name = "v4c128_vllm_model1", .stage = st, .generator = g, .seed = 913, .dims = {{"D", 512}, {"sbs", 8}, {"kbs", 2}},
       .lists = {{"start_pos", {120}}, {"q_len", {10}}}, .params = {{"pads", 1}, {"bf16_values", 1}},
       .attrs = {{"cmp_ratio", I(128)}},
       .doc = "the C128 compressor (coff 1, 128-row softmax) into MODEL1 records: a chunk completing entry 0 from 120 "
              "state rows and 8 of its own, then 2 tokens of the next group (saved, not emitted)"},
  };
}

}  // namespace dsa::v4::compressor_cache
