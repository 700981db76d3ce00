// v41.logits: input generators and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"
#include "numerics/rng.hpp"
#include "stage/gen/gen.hpp"
#include "stages/v41/logits/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::logits {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kQ = 1, kK, kW, kRange, kPages, kLists };

// One MXFP4 row of D values drawn N(0, 1) * 2^U{-4..4} per row (zero_block: block 1 all zero), quantized by the REF
// rule: D/2 code bytes and the ue8m0 bytes packed little-endian into an int32.
void mx4_row(Rng& rng, std::int64_t D, bool zero_block, std::uint8_t* codes, std::int32_t* sf) {
  float x[128];
  const double sc = std::ldexp(1.0, static_cast<int>(rng.randint(-4, 4)));
  for (std::int64_t d = 0; d < D; ++d) x[d] = num::round_to_bf16(static_cast<float>(rng.normal() * sc));
  if (zero_block)
    for (std::int64_t d = 32; d < 64; ++d) x[d] = 0.0f;
  std::uint32_t packed = 0;
  for (std::int64_t b = 0; b < D / 32; ++b) {
    std::uint8_t sb = 0;
    fp4core::mxfp4_block(x + 32 * b, codes + 16 * b, &sb, fp4core::Mx4Rule::ref, {});
    packed |= static_cast<std::uint32_t>(sb) << (8 * b);
  }
  *sf = static_cast<std::int32_t>(packed);
}

Tensor weights(const Rng& root, std::int64_t R, std::int64_t H, bool bf16) {
  Tensor w(bf16 ? DType::bf16 : DType::f32, {R, H});
  Rng g = root.fork(kW);
  for (std::int64_t i = 0; i < R * H; ++i) {
    const double v = g.normal() * 0x1p-6;  // the V4.1 fold: weights_proj * 2^-6
    if (bf16) w.data<std::uint16_t>()[i] = num::f64_to_bf16(v);
    else w.data<float>()[i] = static_cast<float>(v);
  }
  return w;
}

void queries(const Rng& root, std::int64_t R, std::int64_t H, std::int64_t D, Case& c) {
  Tensor q(DType::u8, {R, H, D / 2}), qs(DType::i32, {R, H});
  Rng g = root.fork(kQ);
  for (std::int64_t i = 0; i < R * H; ++i) mx4_row(g, D, i % 13 == 5, q.data<std::uint8_t>() + i * (D / 2), qs.data<std::int32_t>() + i);
  c.inputs["q_fp4"] = q;
  c.inputs["q_sf"] = qs;
}

// dims R, H, N, D; params bf16 (bf16 weights and logits), nan_key (that key's first scale byte 0xFF: NaN logits).
void gen_ragged(const GoldenSpec& s, std::uint64_t seed, int, Case& c) {
  const Rng root(seed);
  const std::int64_t R = s.dim("R", 6), H = s.dim("H", 8), N = s.dim("N", 128), D = s.dim("D", 128);
  queries(root, R, H, D, c);
  Tensor kv(DType::u8, {N, D / 2}), ks(DType::i32, {N});
  Rng g = root.fork(kK);
  for (std::int64_t j = 0; j < N; ++j) mx4_row(g, D, j % 17 == 3, kv.data<std::uint8_t>() + j * (D / 2), ks.data<std::int32_t>() + j);
  const double nk = s.param("nan_key", -1);
  if (nk >= 0) ks.data<std::int32_t>()[static_cast<std::int64_t>(nk)] |= 0xFF;
  Tensor lo(DType::i32, {R}), hi(DType::i32, {R});
  Rng rr = root.fork(kRange);
  for (std::int64_t r = 0; r < R; ++r) {
    const std::int64_t e = rr.randint(N / 2, N), b = rr.randint(0, e / 2);
    lo.data<std::int32_t>()[r] = static_cast<std::int32_t>(b), hi.data<std::int32_t>()[r] = static_cast<std::int32_t>(e);
  }
  c.inputs["weights"] = weights(root, R, H, s.param("bf16", 0) != 0);
  c.inputs["kv_fp4"] = kv, c.inputs["kv_sf"] = ks, c.inputs["ks"] = lo, c.inputs["ke"] = hi;
}

// dims B (requests), H, page_size, pages, nsb; attrs next_n, sparse_block_kv; list context (per request). Each
// request's pages are shuffled page ids; its candidate blocks a sorted random subset of its blocks holding the newest
// one, -1 padded. Cache slots hold MXFP4 records of N(0, 1) * 2^U{-4..4} rows (v41_idx_mxfp4_68).
void gen_sparse(const GoldenSpec& s, std::uint64_t seed, int, Case& c) {
  const Rng root(seed);
  auto attr = [&](const char* k, std::int64_t d) {
    auto it = s.attrs.find(k);
    return it == s.attrs.end() ? d : std::get<std::int64_t>(it->second);
  };
  const std::int64_t nn = attr("next_n", 1), sbk = attr("sparse_block_kv", 8);
  const std::int64_t H = s.dim("H", 8), ps = s.dim("page_size", 128), pages = s.dim("pages", 4), nsb = s.dim("nsb", 8);
  const auto& ctx = s.list("context");
  const std::int64_t B = static_cast<std::int64_t>(ctx.size()), R = B * nn;
  std::int64_t maxp = 1;
  for (auto L : ctx) maxp = std::max(maxp, (L + nn - 1 + ps - 1) / ps);
  if (B * maxp > pages) throw std::invalid_argument(s.name + ": more pages needed than dim pages");
  queries(root, R, H, 128, c);
  Tensor kc(DType::u8, {pages, ps, 1, 68});
  fill_random_k_cache(kc.data<std::uint8_t>(), pages * ps, ps, root.fork(kK));
  const auto perm = gen::permutation(root.fork(kPages), pages);
  Tensor bt(DType::i32, {R, maxp}), cl(DType::i32, {R}), sb(DType::i32, {R, nsb});
  Rng lr = root.fork(kLists);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t L = ctx[static_cast<std::size_t>(b)], nblocks = (L + sbk - 1) / sbk;
    std::vector<std::int64_t> pick{nblocks - 1};  // the newest block (pinned by the publisher)
    for (std::int64_t k = 0; k < nblocks - 1 && static_cast<std::int64_t>(pick.size()) < nsb - 1; ++k)
      if (lr.uniform() < 0.5) pick.push_back(k);
    std::sort(pick.begin(), pick.end());
    for (std::int64_t i = 0; i < nn; ++i) {
      const std::int64_t r = b * nn + i;
      cl.data<std::int32_t>()[r] = static_cast<std::int32_t>(L + i);
      for (std::int64_t k = 0; k < maxp; ++k) bt.data<std::int32_t>()[r * maxp + k] = static_cast<std::int32_t>(perm[static_cast<std::size_t>(b * maxp + k)]);
      for (std::int64_t k = 0; k < nsb; ++k)
        sb.data<std::int32_t>()[r * nsb + k] = k < static_cast<std::int64_t>(pick.size()) ? static_cast<std::int32_t>(pick[static_cast<std::size_t>(k)]) : -1;
    }
  }
  c.inputs["weights"] = weights(root, R, H, true);
  c.inputs["kv_cache"] = kc, c.inputs["context_lens"] = cl, c.inputs["block_table"] = bt, c.inputs["sparse_blocks"] = sb;
}

}  // namespace

void fill_random_k_cache(std::uint8_t* cache, std::int64_t slots, std::int64_t page_size, Rng g) {
  const layouts::KvRecord rec{layouts::find_record("v41_idx_mxfp4_68"), layouts::RecordOrder::page_segregated, page_size};
  for (std::int64_t slot = 0; slot < slots; ++slot) {
    float x[128];
    const double sc = std::ldexp(1.0, static_cast<int>(g.randint(-4, 4)));
    for (auto& v : x) v = num::round_to_bf16(static_cast<float>(g.normal() * sc));
    layouts::store_record(rec, x, slot, cache, layouts::producer_quant(*rec.f));
  }
}

std::vector<Generator> generators() {
  return {{"v41lg.ragged", "v41.logits",
           "fp8_fp4_mqa_logits: MXFP4 (REF rule) of bf16 N(0,1) * 2^U{-4..4} rows for q [R, H] and keys [N] (every 13th "
           "head / 17th key with an all-zero block), weights N(0,1) * 2^-6 (f32, or bf16 with param bf16), ks/ke random "
           "causal ranges; dims R, H, N, D; param nan_key (a key with scale byte 0xFF)",
           gen_ragged},
          {"v41lg.sparse", "v41.logits",
           "fp8_fp4_paged_sparse_mqa_logits: a paged v41_idx_mxfp4_68 cache of MXFP4 rows, requests (list context) with "
           "shuffled pages, candidate lists (sorted random blocks holding the newest, -1 padded), next_n rows per request "
           "(the second one position later), bf16 weights; dims H, page_size, pages, nsb",
           gen_sparse}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v41.logits";
  return {
      {.name = "v41lg_ragged_f32", .stage = st, .generator = "v41lg.ragged", .seed = 4201, .dims = {{"R", 6}, {"H", 8}, {"N", 96}},
       .params = {{"nan_key", 40}}, .poison = {{"weights", 1, 3, golden::kNaN}, {"weights", 2, 5, golden::kInf}},
       .doc = "fp8_fp4_mqa_logits with f32 weights and logits: ragged causal ranges (-inf outside), zero blocks; NaN "
              "policy: a key whose scale byte is 0xFF gives NaN logits in every row that sees it, a NaN weight a NaN row, "
              "an inf weight +-inf where its head's ReLU is positive and NaN where it is 0"},
      {.name = "v41lg_sparse_mtp", .stage = st, .generator = "v41lg.sparse", .seed = 4202,
       .dims = {{"H", 8}, {"page_size", 128}, {"pages", 4}, {"nsb", 8}}, .lists = {{"context", {200, 77}}},
       .attrs = {{"next_n", I(2)}, {"logits_dtype", S("bf16")}},
       .doc = "fp8_fp4_paged_sparse_mqa_logits (DeepGEMM 2.8): bf16 logits of candidate blocks (column c = block[c/8]*8 + "
              "c%8) through shuffled pages, MTP row pairs, the newest block partial (positions past the context -inf), "
              "-1 padded lists"},
  };
}

}  // namespace dsa::v41::logits
