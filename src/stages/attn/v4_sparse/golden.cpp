// attn.v4_sparse: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/index_rows.hpp"
#include "stages/attn/v4_sparse/stage.hpp"
#include "engines/ascend_li/ascend_li.hpp"
#include "stage/gen/gen.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::v4_sparse {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::kInf;
using golden::kNaN;

namespace {

using i64 = std::int64_t;
enum Stream : std::uint64_t { kQ = 1, kOri, kCmp, kOriTable, kCmpTable, kList };

i64 attr_int(const GoldenSpec& s, const char* k, i64 def) {
  auto it = s.attrs.find(k);
  return it == s.attrs.end() ? def : std::get<i64>(it->second);
}

// dims N, D, bs_o, bs_c, K (C4 list width); lists q_len, kv_len (per request); attrs cmp_ratio, ori_win_left,
// ori_win_right (read as the stage does); params q_sigma, kv_sigma, sink (> 0: sinks N(0, sink), heads 0/1 at
// +-sink_large), poison_unused (1: every cache row no query row reads is NaN, so a kernel reading outside its keys
// shows). Each request has one spare block beyond what it reads in both caches; block ids shuffled. C4 lists: a
// random order of min(K, limit) distinct entries of [0, limit) (the QLI's set; its score order does not matter
// here), then -1.
void gen_requests(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const i64 N = s.dim("N", 64), D = s.dim("D", 512), bs_o = s.dim("bs_o", 128), bs_c = s.dim("bs_c", 32), K = s.dim("K", 512);
  const i64 ratio = attr_int(s, "cmp_ratio", 1), wl = attr_int(s, "ori_win_left", 127), wr = attr_int(s, "ori_win_right", 0);
  const auto& ql = s.list("q_len");
  const auto& kvl = s.list("kv_len");
  const i64 B = static_cast<i64>(ql.size());
  if (static_cast<i64>(kvl.size()) != B || B == 0) throw std::invalid_argument(s.name + ": q_len and kv_len need one entry per request");
  std::vector<i64> bo(static_cast<std::size_t>(B)), bc(static_cast<std::size_t>(B));
  i64 T = 0, mbo = 1, mbc = 1, nbo = 0, nbc = 0;
  for (i64 b = 0; b < B; ++b) {
    const auto ub = static_cast<std::size_t>(b);
    T += ql[ub];
    bo[ub] = (kvl[ub] + bs_o - 1) / bs_o + 1;
    bc[ub] = (kvl[ub] / std::max<i64>(ratio, 1) + bs_c - 1) / bs_c + 1;
    mbo = std::max(mbo, bo[ub]), mbc = std::max(mbc, bc[ub]);
    nbo += bo[ub], nbc += bc[ub];
  }
  Tensor q(DType::bf16, {T, N, D}), ori(DType::bf16, {nbo, bs_o, 1, D});
  Tensor obt = engines::ascend_li::shuffled_block_table(root.fork(kOriTable), bo, mbo, nbo);
  {
    const Rng r = root.fork(kQ);
    for (i64 i = 0; i < T * N; ++i) {
      Rng x = r.fork(static_cast<std::uint64_t>(i));
      gen::bf16_normal(x, s.param("q_sigma", 1.0), D, q.data<std::uint16_t>() + i * D);
    }
    const Rng k = root.fork(kOri);
    for (i64 sl = 0; sl < nbo * bs_o; ++sl) {
      Rng x = k.fork(static_cast<std::uint64_t>(sl));
      gen::bf16_normal(x, s.param("kv_sigma", 1.0), D, ori.data<std::uint16_t>() + sl * D);
    }
  }
  c.inputs = {{"q", q}, {"ori_kv", ori}, {"ori_block_table", obt}};
  // Requests, and the cache rows every query row reads (for the poison).
  Tensor cu(DType::i32, {B + 1}), kv(DType::i32, {B});
  std::vector<char> used_o(static_cast<std::size_t>(nbo * bs_o), 0), used_c(static_cast<std::size_t>(nbc * bs_c), 0);
  std::vector<i64> list(static_cast<std::size_t>(T * std::max<i64>(K, 1)), -1);
  Tensor cbt;
  if (ratio > 1) cbt = engines::ascend_li::shuffled_block_table(root.fork(kCmpTable), bc, mbc, nbc);
  auto slot = [](const Tensor& bt, i64 mb, i64 bs, i64 b, i64 pos) { return static_cast<i64>(bt.data<std::int32_t>()[b * mb + pos / bs]) * bs + pos % bs; };
  i64 t = 0;
  cu.data<std::int32_t>()[0] = 0;
  for (i64 b = 0; b < B; ++b) {
    const auto ub = static_cast<std::size_t>(b);
    kv.data<std::int32_t>()[b] = static_cast<std::int32_t>(kvl[ub]);
    for (i64 i = 0; i < ql[ub]; ++i, ++t) {
      const i64 p = kvl[ub] - ql[ub] + i;
      if (p < 0) continue;
      for (i64 x = std::max<i64>(0, p - wl); x <= std::min(p + wr, kvl[ub] - 1); ++x) used_o[static_cast<std::size_t>(slot(obt, mbo, bs_o, b, x))] = 1;
      if (ratio <= 1) continue;
      const i64 lim = (p + 1) / ratio;
      if (ratio == 128) {
        for (i64 j = 0; j < lim; ++j) used_c[static_cast<std::size_t>(slot(cbt, mbc, bs_c, b, j))] = 1;
        continue;
      }
      const auto perm = gen::permutation(root.fork(kList).fork(static_cast<std::uint64_t>(t)), lim);
      for (i64 k = 0; k < std::min(K, lim); ++k) {
        const i64 j = perm[static_cast<std::size_t>(k)];
        list[static_cast<std::size_t>(t * K + k)] = j;
        used_c[static_cast<std::size_t>(slot(cbt, mbc, bs_c, b, j))] = 1;
      }
    }
    cu.data<std::int32_t>()[b + 1] = static_cast<std::int32_t>(t);
  }
  c.inputs["cu_seqlens_q"] = cu;
  c.inputs["seqused_kv"] = kv;
  const bool poison = s.param("poison_unused", 0) != 0;
  if (poison)
    for (i64 sl = 0; sl < nbo * bs_o; ++sl)
      if (!used_o[static_cast<std::size_t>(sl)]) std::fill_n(c.inputs["ori_kv"].data<std::uint16_t>() + sl * D, D, std::uint16_t{0x7FC0});
  if (ratio > 1) {
    Tensor cmp(DType::bf16, {nbc, bs_c, 1, D});
    const Rng k = root.fork(kCmp);
    for (i64 sl = 0; sl < nbc * bs_c; ++sl) {
      if (poison && !used_c[static_cast<std::size_t>(sl)]) {
        std::fill_n(cmp.data<std::uint16_t>() + sl * D, D, std::uint16_t{0x7FC0});
        continue;
      }
      Rng x = k.fork(static_cast<std::uint64_t>(sl));
      gen::bf16_normal(x, s.param("kv_sigma", 1.0), D, cmp.data<std::uint16_t>() + sl * D);
    }
    c.inputs["cmp_kv"] = cmp;
    c.inputs["cmp_block_table"] = cbt;
    if (ratio == 4) c.inputs["cmp_sparse_indices"] = gen::to_tensor(list, {T, 1, K});
  }
  Tensor sink;
  if (gen::sinks(s, root, N, sink)) c.inputs["sinks"] = sink;
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4_sparse.requests", "attn.v4_sparse",
           "TND requests (lists q_len, kv_len): q, ori_kv, cmp_kv bf16 N(0, q_sigma / kv_sigma) [N heads, D dims]; PA_ND "
           "caches with block sizes bs_o / bs_c, shuffled block ids, one spare block per request; attr cmp_ratio 1 / 4 / 128 "
           "(C4: per-row lists of min(K, (p+1)//4) distinct visible entries in random order, -1 padded); sink > 0: sinks "
           "N(0, sink) with heads 0/1 at +-sink_large; poison_unused: every cache row no query row reads is NaN",
           gen_requests}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "attn.v4_sparse";
  const char* g = "v4_sparse.requests";
  return {
      {.name = "v4sa_c4_flash_mtp", .stage = st, .generator = g, .seed = 1501,
       .dims = {{"N", 64}, {"D", 512}, {"bs_o", 128}, {"bs_c", 32}, {"K", 512}},
       .lists = {{"q_len", {2, 1, 1}}, {"kv_len", {2057, 300, 3}}},
       .params = {{"sink", 2.0}, {"poison_unused", 1}},
       .attrs = {{"cmp_ratio", I(4)}},
       .doc = "V4-Flash C4 decode (64 heads, 512 dims, window 128, K 512, C4 storage blocks of 32): MTP rows with 514 visible "
              "entries (the list cut at 512), a 75-entry list, a 3-token request (window only); sinks at +-95 (B35); NaN in "
              "every cache row no query reads"},
      {.name = "v4sa_c128_prefill", .stage = st, .generator = g, .seed = 1502,
       .dims = {{"N", 16}, {"D", 512}, {"bs_o", 16}, {"bs_c", 16}},
       .lists = {{"q_len", {4, 3, 2}}, {"kv_len", {258, 3, 1}}},
       .params = {{"sink", 2.0}, {"poison_unused", 1}},
       .attrs = {{"cmp_ratio", I(128)}},
       .doc = "C128 prefill chunks: rows crossing a group boundary (limit 1 -> 2 at p = 255), a fresh 3-token prefill "
              "(shorter than the window, no entry yet), a request with kv_len < q_len (a lonely row: 0); windows cross "
              "16-token blocks"},
      {.name = "v4sa_swa_only", .stage = st, .generator = g, .seed = 1503,
       .dims = {{"N", 16}, {"D", 512}, {"bs_o", 16}},
       .lists = {{"q_len", {5, 1}}, {"kv_len", {200, 129}}},
       .params = {{"sink", 1.0}, {"q_sigma", 2.0}, {"poison_unused", 1}},
       .attrs = {{"cmp_ratio", I(1)}},
       .doc = "SWA-only layer (cmp_ratio 1, no cmp_kv): full 128-token windows sliding over block boundaries, peaked "
              "softmax (q x2), NaN outside every window"},
      {.name = "v4sa_nonfinite", .stage = st, .generator = g, .seed = 1504,
       .dims = {{"N", 16}, {"D", 512}, {"bs_o", 16}, {"bs_c", 16}, {"K", 64}},
       .lists = {{"q_len", {3}}, {"kv_len", {90}}},
       .params = {{"sink", 2.0}},
       .attrs = {{"cmp_ratio", I(4)}},
       .poison = {{"q", 0, 7, kNaN}, {"q", 1, 515, kInf}, {"sinks", 3, -1, kNaN}},
       .doc = "NaN policy: a NaN in q (row 0 head 0), +inf in q (row 1 head 1), a NaN sink (head 3): those heads' outputs NaN, "
              "every other head finite"},
      {.name = "v4sa_c4_flash_full", .stage = st, .generator = g, .seed = 1505,
       .dims = {{"N", 64}, {"D", 512}, {"bs_o", 128}, {"bs_c", 32}, {"K", 512}},
       .lists = {{"q_len", std::vector<std::int64_t>(32, 2)},
                 {"kv_len", {8192, 4100, 2053, 6000, 7777, 128, 129, 3000, 8192, 4100, 2053, 6000, 7777, 128, 129, 3000,
                             8192, 4100, 2053, 6000, 7777, 128, 129, 3000, 8192, 4100, 2053, 6000, 7777, 128, 129, 3000}}},
       .params = {{"sink", 2.0}},
       .attrs = {{"cmp_ratio", I(4)}},
       .committed = false,
       .doc = "V4-Flash decode batch: 32 requests x MTP 2, contexts 128..8192, 64 heads, K 512"},
  };
}

}  // namespace dsa::attn::v4_sparse
