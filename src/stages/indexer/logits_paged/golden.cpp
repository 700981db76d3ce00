// indexer.logits_paged: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "layouts/indexer_kcache.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/logits_paged/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::logits_paged {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

void generate_paged(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t next_n = s.dim("next_n", 1), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  const std::int64_t ps = s.dim("page_size", s.model.page_size);
  const auto L = s.list("context_lens");  // per request: every cached token incl. the next_n new ones
  const std::int64_t B = static_cast<std::int64_t>(L.size());
  const bool two_d = s.param("context_lens_2d", 0) != 0;
  std::int64_t max_blocks = 0, used = 0, maxL = 0;
  for (auto l : L) {
    max_blocks = std::max(max_blocks, (l + ps - 1) / ps);
    used += (l + ps - 1) / ps;
    maxL = std::max(maxL, l);
  }
  max_blocks += s.dim("spare_blocks", 1);               // block_table wider than needed: unused entries -1
  const std::int64_t P = used + s.dim("extra_pages", 2);  // pages nobody owns (poison)
  // Shuffled, sparse block table: request b's pages are a random subset of the pool, in random order.
  const auto perm = permutation(root.fork(kPerm), P);
  Tensor bt(DType::i32, {B, max_blocks});
  std::fill_n(bt.data<std::int32_t>(), B * max_blocks, -1);
  std::size_t next = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = 0; j < (L[static_cast<std::size_t>(b)] + ps - 1) / ps; ++j)
      bt.data<std::int32_t>()[b * max_blocks + j] = static_cast<std::int32_t>(perm[next++]);
  // Cache: poison everywhere, then the planar pages of every request's tokens.
  Tensor cache(DType::u8, {P, ps, 1, layouts::IndexerKCache::record_bytes(D)});
  std::uint8_t* cb = cache.data<std::uint8_t>();
  poison_bytes(root, P * ps, layouts::IndexerKCache::record_bytes(D), threads, cb);
  const layouts::IndexerKCache lay = spec_kcache(s, ps, D);
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t Lb = L[static_cast<std::size_t>(b)];
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(Lb * D));
    std::vector<float> sc(static_cast<std::size_t>(Lb));
    make_keys(root.fork(kKv), static_cast<std::uint64_t>(b), Lb, D, threads, false, codes.data(), sc.data());
    for (std::int64_t j = 0; j < Lb; ++j) {
      const std::int64_t pg = bt.data<std::int32_t>()[b * max_blocks + j / ps];
      lay.store(cb, pg, j % ps, codes.data() + j * D, &sc[static_cast<std::size_t>(j)]);
    }
  }
  QBuild qb = make_q(root, B * next_n, H, D, threads);
  Tensor cl = two_d ? Tensor(DType::i32, {B, next_n}) : Tensor(DType::i32, {B});
  for (std::int64_t b = 0; b < B; ++b) {
    const auto Lb = static_cast<std::int32_t>(L[static_cast<std::size_t>(b)]);
    if (!two_d) cl.data<std::int32_t>()[b] = Lb;
    else  // vLLM/sglang expanded per-row lengths: row (b,t) sees j < L - next_n + t + 1
      for (std::int64_t t = 0; t < next_n; ++t)
        cl.data<std::int32_t>()[b * next_n + t] = Lb == 0 ? 0 : static_cast<std::int32_t>(Lb - next_n + t + 1);
  }
  c.inputs = {{"q", qb.q_fp8.reshape({B, next_n, H, D})}, {"kv_cache", cache}, {"weights", qb.weights},
              {"context_lens", cl}, {"block_table", bt}};
  if (!c.has_attr("max_context_len")) c.attrs["max_context_len"] = AttrValue{std::max<std::int64_t>(1, (maxL + ps - 1) / ps * ps)};
}

std::vector<Generator> generators() {
  return {
      {"logits.paged_mtp", "indexer.logits_paged",
       "decode/MTP over the paged cache: context_lens per request (incl. the next_n new tokens; 0 allowed), pages "
       "shuffled from a pool with extra_pages unowned poison pages, block_table spare_blocks wider (-1), tails of "
       "last pages poisoned; the cache in the layout of attr layout. list context_lens; dims next_n, H, D, page_size, "
       "spare_blocks, extra_pages; params context_lens_2d",
       generate_paged}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "paged_nonfinite", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 504,
       .dims = {{"next_n", 2}, {"H", 32}, {"D", 64}}, .lists = {{"context_lens", {70, 33}}}, .attrs = {{"clean_logits", I(1)}},
       .poison = {{"q", 0, 40, kNaN}, {"weights", 2, 3, -kInf}, {"weights", 3, -1, kNaN}},
       .doc = "NaN policy: a NaN fp8 query element, a -inf gate and an all-NaN gate row in the paged decode logits"},
      {.name = "paged_decode_n1", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 501,
       .dims = {{"next_n", 1}}, .lists = {{"context_lens", {1, 64, 65, 200, 0}}}, .attrs = {{"clean_logits", I(1)}},
       .doc = "decode, lengths 1/64/65/200 and an empty request, shuffled sparse block table, poisoned page tails"},
      {.name = "paged_mtp_n2_2d", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 502,
       .dims = {{"next_n", 2}}, .lists = {{"context_lens", {130, 7, 256}}}, .params = {{"context_lens_2d", 1}},
       .attrs = {{"clean_logits", I(0)}},
       .doc = "MTP next_n = 2 with 2-D per-row context_lens (vLLM / sglang expanded lengths), uncleaned"},
      {.name = "paged_mtp_n4", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 503,
       .dims = {{"next_n", 4}}, .lists = {{"context_lens", {4, 300, 129}}}, .attrs = {{"clean_logits", I(1)}},
       .doc = "MTP next_n = 4, 1-D causal lengths (row t sees j <= L-4+t), one request of exactly next_n tokens"},
      {.name = "paged_vllm_torch", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 508,
       .dims = {{"next_n", 1}}, .lists = {{"context_lens", {1, 64, 130, 0}}},
       .attrs = {{"clean_logits", I(1)}, {"kernel", S("vllm-torch")}},
       .doc = "kernel=vllm-torch: vLLM's fp8_paged_mqa_logits_torch decode path (fp32 head scores, relu, weight, head "
              "sum, then the key scale): the fixed-order emulation's logits, judged by the derived per-logit bound"},
      {.name = "paged_aiter_preshuffle", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 505,
       .dims = {{"next_n", 2}}, .lists = {{"context_lens", {130, 64, 17}}},
       .attrs = {{"clean_logits", I(0)}, {"layout", S("aiter_preshuffle")}},
       .doc = "ROCm aiter deepgemm_fp8_paged_mqa_logits Preshuffle=True over the MFMA 16x16 preshuffled cache (page 64)"},
      {.name = "paged_aiter_rowmajor_p1", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 506,
       .dims = {{"next_n", 1}, {"page_size", 1}, {"extra_pages", 9}}, .lists = {{"context_lens", {40, 7, 0, 23}}},
       .attrs = {{"clean_logits", I(0)}, {"page_size", I(1)}, {"layout", S("aiter_rowmajor_p1")}},
       .doc = "ROCm aiter legacy path: page_size 1 (132-byte token records) read through sglang's page_table_1"},
      {.name = "paged_cutedsl_target_verify", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 507,
       .dims = {{"next_n", 4}, {"spare_blocks", 2}}, .lists = {{"context_lens", {300, 129, 64, 1000}}},
       .attrs = {{"clean_logits", I(0)}, {"max_context_len", I(1152)}, {"dsl_expand_factor", I(2)}},
       .doc = "sglang CuTe-DSL cutedsl_paged_mqa_logits target verify (next_n 4, dsl_expand_factor 2 x atom 2): 1-D "
              "context_lens L_b, row t valid on keys < L_b - 4 + t + 1, uncleaned, max_context_len = table width x 64"},
  };
}

}  // namespace dsa::indexer::logits_paged
