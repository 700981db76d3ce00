// v41.select: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <limits>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stages/v41/select/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::select {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kScores = 1, kLevelOne, kGarbage };

std::int64_t attr_i(const GoldenSpec& s, const char* k, std::int64_t def) {
  auto it = s.attrs.find(k);
  return it == s.attrs.end() ? def : std::get<std::int64_t>(it->second);
}

// bf16 scores as the reference's bf16 tensors give them: sum_h w_h relu(q_h . k_j) is >= 0 and coarse, so the values
// are bf16 roundings of |N(0, 1)| * 8 (many exact ties at every rank); past the row's reach: garbage (+1e30, NaN)
// a correct selection never reads.
void fill_scores(Tensor& t, const std::vector<std::int64_t>& reach, const Rng& root, Stream st) {
  const std::int64_t S_ = t.dim(0), N = t.dim(1);
  for (std::int64_t r = 0; r < S_; ++r) {
    Rng g = root.fork(st).fork(static_cast<std::uint64_t>(r));
    for (std::int64_t j = 0; j < N; ++j) {
      double v = std::fabs(g.normal()) * 8.0;
      if (j >= reach[static_cast<std::size_t>(r)]) v = (j % 2) ? 1e30 : std::numeric_limits<double>::quiet_NaN();
      t.data<std::uint16_t>()[r * N + j] = num::f64_to_bf16(v);
    }
  }
}

// dims S, N; list positions; attrs cmp_ratio, block_size; params consumer (1: candidate_blocks = the blocks a
// publisher of pub_blocks blocks chose on another score tensor of the same rows: the level-one layer's),
// pub_blocks, neg_inf (1: every 5th reachable score -inf, masked positions as a kernel's scores carry them).
void gen(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t S_ = s.dim("S", 4), N = s.dim("N", 512);
  const auto& pos = s.list("positions");
  if (static_cast<std::int64_t>(pos.size()) != S_) throw std::invalid_argument("v41sel.scores: positions needs S entries");
  const std::int64_t r = attr_i(s, "cmp_ratio", 1), bsz = attr_i(s, "block_size", 8);
  std::vector<std::int64_t> reach(static_cast<std::size_t>(S_));
  Tensor p(DType::i32, {S_});
  for (std::int64_t i = 0; i < S_; ++i) {
    p.data<std::int32_t>()[i] = static_cast<std::int32_t>(pos[static_cast<std::size_t>(i)]);
    reach[static_cast<std::size_t>(i)] = pos[static_cast<std::size_t>(i)] < 0 ? 0 : (pos[static_cast<std::size_t>(i)] + 1) / r;
  }
  Tensor sc(DType::bf16, {S_, N});
  fill_scores(sc, reach, root, kScores);
  if (s.param("neg_inf", 0) != 0)
    for (std::int64_t i = 0; i < S_; ++i)
      for (std::int64_t j = 3; j < reach[static_cast<std::size_t>(i)]; j += 5) sc.data<std::uint16_t>()[i * N + j] = 0xFF80;  // -inf
  c.inputs = {{"scores", sc}, {"positions", p}};
  if (s.param("consumer", 0) != 0) {
    // The level-one layer's published blocks: its own scores of the same rows, its block maxima, the newest pinned.
    const std::int64_t M = static_cast<std::int64_t>(s.param("pub_blocks", 16));
    Tensor lo(DType::bf16, {S_, N});
    fill_scores(lo, reach, root, kLevelOne);
    Case one;
    one.inputs = {{"scores", lo}, {"positions", p}};
    Params q;
    q.r = r, q.block_size = bsz, q.S = S_, q.N = N;
    Tensor cb(DType::i32, {S_, M});
    for (std::int64_t i = 0; i < S_; ++i) {
      std::vector<std::int64_t> ids;
      std::vector<double> bs;
      row_blocks(one, q, i, ids, bs);
      const std::vector<std::int64_t> out = top_ascending(ids, bs, M);
      for (std::int64_t j = 0; j < M; ++j)
        cb.data<std::int32_t>()[i * M + j] = j < static_cast<std::int64_t>(out.size()) ? static_cast<std::int32_t>(out[static_cast<std::size_t>(j)]) : -1;
    }
    c.inputs["candidate_blocks"] = cb;
    if (s.param("sparse_scores", 0) != 0) {  // the consumer's DeepGEMM sparse logits: column e * bs + o = position cb[e] * bs + o
      Tensor sp(DType::bf16, {S_, M * bsz});
      for (std::int64_t i = 0; i < S_; ++i)
        for (std::int64_t e = 0; e < M; ++e)
          for (std::int64_t o = 0; o < bsz; ++o) {
            const std::int64_t b = cb.data<std::int32_t>()[i * M + e], j = b * bsz + o;
            sp.data<std::uint16_t>()[(i * M + e) * bsz + o] = b < 0 || j >= reach[static_cast<std::size_t>(i)] ? std::uint16_t{0xFF80} : sc.data<std::uint16_t>()[i * N + j];
          }
      c.inputs["scores"] = sp;
    }
  }
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v41sel.scores", "v41.select",
           "bf16 index scores of S query rows at token positions (list positions): bf16(|N(0,1)| * 8), many exact ties; "
           "garbage past each row's reach (+1e30, NaN); consumer: candidate_blocks published by a level-one layer "
           "(pub_blocks blocks, its own scores); neg_inf: every 5th reachable score -inf. dims S, N; attrs cmp_ratio, "
           "block_size",
           gen}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v41.select";
  const char* g = "v41sel.scores";
  return {
      {.name = "v41sel_publish", .stage = st, .generator = g, .seed = 1101, .dims = {{"S", 7}, {"N", 700}},
       .lists = {{"positions", {-1, 0, 5, 63, 64, 301, 699}}},
       .attrs = {{"k", I(64)}, {"topk_blocks", I(32)}, {"publish", I(1)}},
       .poison = {{"scores", 5, 100, golden::kNaN}, {"scores", 6, 650, golden::kInf}, {"scores", 4, 10, -golden::kInf}},
       .doc = "the candidate source layer (scaled: k 64, 32 blocks): a padding row, reach 1, a partial newest block pinned, "
              "reach exactly 64 and 65, rows past the block cap; bf16 ties at the k-th score; NaN policy: a NaN score "
              "ranks first (its block's max is NaN: published), +inf next, a -inf position is no candidate"},
      {.name = "v41sel_consumer", .stage = st, .generator = g, .seed = 1102, .dims = {{"S", 5}, {"N", 600}},
       .lists = {{"positions", {599, 300, 100, 40, 7}}}, .params = {{"consumer", 1}, {"pub_blocks", 6}},
       .attrs = {{"k", I(64)}},
       .doc = "a consumer layer choosing inside 6 published blocks (48 positions < k = 64: every row short, -1 padded), "
              "rows whose reach has fewer blocks than the cap"},
      {.name = "v41sel_consumer_sparse_logits", .stage = st, .generator = g, .seed = 1106, .dims = {{"S", 4}, {"N", 400}},
       .lists = {{"positions", {399, 200, 60, 9}}}, .params = {{"consumer", 1}, {"pub_blocks", 12}, {"sparse_scores", 1}},
       .attrs = {{"k", I(32)}, {"scores_layout", S("candidates")}},
       .doc = "a consumer fed DeepGEMM's sparse logits directly (scores_layout candidates: column c = block list[c / 8] * 8 + c % "
              "8; the partial newest block and -1 entries at -inf): the same selection as on position-indexed scores"},
      {.name = "v41sel_consumer_ref_quirk", .stage = st, .generator = g, .seed = 1103, .dims = {{"S", 4}, {"N", 600}},
       .lists = {{"positions", {599, 250, 90, 20}}}, .params = {{"consumer", 1}, {"pub_blocks", 5}, {"neg_inf", 1}},
       .attrs = {{"k", I(64)}, {"short_rows", S("ref")}},
       .doc = "the reference model's short-row quirk: fewer candidates than min(k, reach) are followed by reachable "
              "non-candidate positions instead of -1; -inf scores inside published blocks"},
      {.name = "v41sel_ratio2", .stage = st, .generator = g, .seed = 1104, .dims = {{"S", 5}, {"N", 400}},
       .lists = {{"positions", {799, 130, 2, 1, 0}}}, .attrs = {{"k", I(64)}, {"cmp_ratio", I(2)}},
       .doc = "an index source of a ratio-2 layer: reach (p + 1) / 2 (positions 1 and 0 reach 1 and 0)"},
      {.name = "v41sel_serving", .stage = st, .generator = g, .seed = 1105, .dims = {{"S", 2}, {"N", 20000}},
       .lists = {{"positions", {19999, 16500}}}, .attrs = {{"publish", I(1)}},
       .doc = "DeepSeek-V4.1 layer 20 at serving sizes: top 512 of 20000 positions and 2048 of 2500 blocks (the cap engaged)"},
  };
}

}  // namespace dsa::v41::select
