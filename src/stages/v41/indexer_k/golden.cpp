// v41.indexer_k: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "numerics/rope.hpp"
#include "stage/gen/gen.hpp"
#include "stages/v41/indexer_k/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::indexer_k {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kK = 1, kGamma, kPerm };

std::int64_t attr_i(const GoldenSpec& s, const char* k, std::int64_t def) {
  auto it = s.attrs.find(k);
  return it == s.attrs.end() ? def : std::get<std::int64_t>(it->second);
}

// lists start_pos, q_len per request; dims nblk (pages, page 0 the null page), page_size, rec (68 | 132); params
// pads (tokens with slot -1 at the end). Every token's slot is the slot of its group's entry p / r (a mid-group token
// carries the slot its group's key goes to: the gate decides), entries of each request in shuffled slots of pages
// >= 1. k_pre rows N(0, 1) * 2^U{-40..3} (rows below the norm's eps give small normalized values: the scale floors),
// every 7th row zero, every 11th row with exact bf16 midpoints of e2m1 / e4m3 steps times a power of two.
void gen_tokens(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t r = attr_i(s, "cmp_ratio", 2), ps = s.dim("page_size", 128), nblk = s.dim("nblk", 2), rec = s.dim("rec", 68);
  const auto& s0 = s.list("start_pos");
  const auto& ql = s.list("q_len");
  const std::int64_t B = static_cast<std::int64_t>(s0.size()), pads = static_cast<std::int64_t>(s.param("pads", 2));
  std::int64_t T = pads, cap = 1, entries = 0;
  for (std::int64_t b = 0; b < B; ++b) T += ql[b], cap = std::max(cap, s0[b] + ql[b]), entries += (s0[b] + ql[b]) / r + 1;
  if (entries > (nblk - 1) * ps) throw std::invalid_argument(s.name + ": needs more cache slots than pages 1..nblk-1 hold");
  const auto perm = gen::permutation(root.fork(kPerm), (nblk - 1) * ps);
  std::vector<std::int64_t> base(static_cast<std::size_t>(B));
  for (std::int64_t b = 0, o = 0; b < B; ++b) base[static_cast<std::size_t>(b)] = o, o += (s0[b] + ql[b]) / r + 1;
  Tensor kp(DType::bf16, {T, 128}), pos(DType::i64, {T}), km(DType::i64, {T}), gamma(DType::bf16, {128});
  {
    Rng n = root.fork(kGamma);
    for (std::int64_t i = 0; i < 128; ++i) gamma.data<std::uint16_t>()[i] = num::f64_to_bf16(1.0 + 0.1 * n.normal());
  }
  std::int64_t t = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < ql[b]; ++i, ++t) {
      const std::int64_t p = s0[b] + i;
      pos.data<std::int64_t>()[t] = p;
      km.data<std::int64_t>()[t] = ps + perm[static_cast<std::size_t>(base[static_cast<std::size_t>(b)] + p / r)];
    }
  for (; t < T; ++t) pos.data<std::int64_t>()[t] = 0, km.data<std::int64_t>()[t] = -1;
  gen::for_rows(root, kK, T, threads, [&](std::int64_t row, Rng& rng) {
    std::uint16_t* d = kp.data<std::uint16_t>() + row * 128;
    if (row % 7 == 3) {
      for (int i = 0; i < 128; ++i) d[i] = 0;
    } else if (row % 11 == 5) {
      static const double m[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 1.0625, 1.1875, 448.0, 7.0};
      const double sc = std::ldexp(1.0, static_cast<int>(rng.randint(-6, 2)));
      for (int i = 0; i < 128; ++i) d[i] = num::f64_to_bf16((rng.uniform() < 0.5 ? -1 : 1) * m[rng.randint(0, 11)] * sc);
    } else {
      const double sc = std::ldexp(1.0, static_cast<int>(rng.randint(-40, 3)));
      for (int i = 0; i < 128; ++i) d[i] = num::f64_to_bf16(rng.normal() * sc);
    }
  });
  Tensor cs(DType::f32, {cap, 64});
  num::v4_cos_sin_cache(64, cap, cs.data<float>());
  Tensor kc(DType::u8, {nblk, ps, rec});
  // Canary bytes: a fixed sequence of period 251 (every byte differs from its neighbours; compressible, unlike random
  // bytes) that every byte the step must not write has to keep.
  for (std::int64_t i = 0; i < kc.numel(); ++i) kc.data<std::uint8_t>()[i] = static_cast<std::uint8_t>((i * 131 + 7) % 251);
  c.inputs = {{"k_pre", kp}, {"positions", pos}, {"cos_sin_cache", cs}, {"norm_weight", gamma}, {"kv_slot_mapping", km}, {"k_cache_in", kc}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v41k.tokens", "v41.indexer_k",
           "tokens of requests (lists start_pos, q_len; attr cmp_ratio): k_pre bf16 N(0,1) * 2^U{-40..3} per row (rows "
           "below the norm's eps: small normalized keys, the scale floors), every 7th row zero, every 11th exact e2m1 / "
           "e4m3 midpoints times 2^U{-6..2}; norm_weight 1 + N(0, 0.01); each token's slot the shuffled slot of its group's "
           "entry p / r in pages >= 1 (page 0 the null page); params pads (slot -1 tokens at the end); dims nblk, "
           "page_size, rec (68 | 132); V4 YaRN cos_sin_cache rows; k_cache_in canary bytes (i * 131 + 7) mod 251",
           gen_tokens}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v41.indexer_k";
  const char* g = "v41k.tokens";
  return {
      {.name = "v41k_mxfp4_c2", .stage = st, .generator = g, .seed = 4101, .dims = {{"nblk", 2}, {"page_size", 128}, {"rec", 68}},
       .lists = {{"start_pos", {0, 9}}, {"q_len", {23, 6}}}, .params = {{"pads", 2}}, .attrs = {{"cmp_ratio", I(2)}},
       .poison = {{"k_pre", 9, 5, golden::kNaN}},
       .doc = "the ratio-2 K owner into the 68-byte MXFP4 cache: a prefill from 0 and a decode chunk ending mid-group "
              "(its last token writes nothing), zero rows (scale floor 6*2^-126), tiny rows between the MXFP4 floors (B54), "
              "exact midpoints; NaN policy: a NaN in k_pre makes its key NaN (scale 0xFF, NaN codes)"},
      {.name = "v41k_fp8_c1", .stage = st, .generator = g, .seed = 4102, .dims = {{"nblk", 2}, {"page_size", 128}, {"rec", 132}},
       .lists = {{"start_pos", {40}}, {"q_len", {20}}}, .params = {{"pads", 1}}, .attrs = {{"cmp_ratio", I(1)}, {"layout", S("v41_idx_fp8_132")}},
       .doc = "the ratio-1 K owner (layer 20) into the FP8 option's 132-byte cache: every token writes, RoPE at its own "
              "position, one fp32 2^e per token"},
  };
}

}  // namespace dsa::v41::indexer_k
