// indexer.npu_lightning: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::npu_lightning {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kQ = 1, kW, kKey, kPerm };

using i64 = std::int64_t;

// dims H, D, bs; lists q_len, kv_len (per request; with cp: the first CP half) and q_len_next, kv_len_next (the second
// half: cp_split=prev_next, positions written); params fp16 (1: fp16 q/k), wf32 (1: f32 weights), dup_keys (request
// 0's keys 3m+1 copy key 3m: exact ties; keys 3m+2 copy it with one element one ulp apart: near-ties), shared.
void gen_requests(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const i64 H = s.dim("H", 64), D = s.dim("D", 128), bs = s.dim("bs", 128);
  const auto& ql = s.list("q_len");
  const auto& kvl = s.list("kv_len");
  const bool cp = s.has_list("q_len_next");
  const std::vector<i64> qn = cp ? s.list("q_len_next") : std::vector<i64>(ql.size(), 0);
  const std::vector<i64> kvn = cp ? s.list("kv_len_next") : std::vector<i64>(ql.size(), 0);
  const bool f16 = s.param("fp16", 0) > 0, wf32 = s.param("wf32", 0) > 0;
  const double shared = s.param("shared", 0.5);
  const i64 B = static_cast<i64>(ql.size());
  if (kvl.size() != ql.size() || qn.size() != ql.size() || kvn.size() != ql.size())
    throw std::invalid_argument("li_npu.requests: q_len, kv_len (and the *_next lists) need one entry per request");
  i64 T0 = 0, T1 = 0, maxblk = 1, nblk = 2;
  std::vector<i64> blocks(static_cast<std::size_t>(B));
  for (i64 b = 0; b < B; ++b) {
    T0 += ql[b], T1 += qn[b];
    blocks[static_cast<std::size_t>(b)] = (std::max(kvl[b], kvn[b]) + bs - 1) / bs + 1;
    maxblk = std::max(maxblk, blocks[static_cast<std::size_t>(b)]);
    nblk += blocks[static_cast<std::size_t>(b)];
  }
  if (cp && T0 != (T0 + T1 + 1) / 2)
    throw std::invalid_argument("li_npu.requests: the first CP half must hold ceil(T / 2) rows (torch.split(q, (T + 1) // 2))");
  const i64 T = T0 + T1;
  auto enc = [f16](double v) { return f16 ? num::f32_to_fp16(static_cast<float>(v)) : num::f64_to_bf16(v); };
  std::vector<double> common(static_cast<std::size_t>(D));
  {
    Rng r = root.fork(kQ).fork(0xC0);
    for (auto& v : common) v = r.normal();
  }
  const DType dt = f16 ? DType::fp16 : DType::bf16;
  Tensor key(dt, {nblk, bs, 1, D});  // every slot filled: slots no request reads hold junk that must not be read
  for (i64 sl = 0; sl < nblk * bs; ++sl) {
    Rng r = root.fork(kKey).fork(static_cast<std::uint64_t>(sl));
    const double mag = r.uniform(0.3, 2.0);
    for (i64 d = 0; d < D; ++d) key.data<std::uint16_t>()[sl * D + d] = enc(mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]));
  }
  Tensor bt = dsa::engines::ascend_li::shuffled_block_table(root.fork(kPerm), blocks, maxblk, nblk);
  if (s.param("dup_keys", 0) > 0 && B > 0) {
    auto slot = [&](i64 j) { return static_cast<i64>(bt.data<std::int32_t>()[j / bs]) * bs + j % bs; };
    std::uint16_t* k = key.data<std::uint16_t>();
    for (i64 j = 0; j + 2 < std::max(kvl[0], kvn[0]); j += 3) {
      std::copy(k + slot(j) * D, k + (slot(j) + 1) * D, k + slot(j + 1) * D);
      std::copy(k + slot(j) * D, k + (slot(j) + 1) * D, k + slot(j + 2) * D);
      std::uint16_t& e = k[slot(j + 2) * D + j % D];
      e = static_cast<std::uint16_t>((e & 0x7FFF) == 0 ? e : e + 1);  // one ulp further from 0
    }
  }
  Tensor q(dt, {T, H, D}), w(wf32 ? DType::f32 : dt, {T, H}), pos(DType::i64, {T});
  for (i64 t = 0; t < T; ++t) {
    Rng r = root.fork(kQ).fork(static_cast<std::uint64_t>(t));
    Rng rw = root.fork(kW).fork(static_cast<std::uint64_t>(t));
    for (i64 h = 0; h < H; ++h) {
      const double mag = r.uniform(0.2, 2.0);
      for (i64 d = 0; d < D; ++d) q.data<std::uint16_t>()[(t * H + h) * D + d] = enc(mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]));
      const double wv = 0.125 * rw.normal();
      if (wf32) w.data<float>()[t * H + h] = static_cast<float>(wv);
      else w.data<std::uint16_t>()[t * H + h] = enc(wv);
    }
  }
  // Metadata of each call (prefix sums without the leading 0; kv lengths) and the rows' global positions.
  auto meta = [&](const std::vector<i64>& qlen, const std::vector<i64>& kv, i64 row0, const char* aq_name, const char* ak_name) {
    Tensor aq(DType::i32, {B}), ak(DType::i32, {B});
    i64 acc = 0;
    for (i64 b = 0; b < B; ++b) {
      for (i64 i = 0; i < qlen[b]; ++i) pos.data<i64>()[row0 + acc + i] = kv[b] - qlen[b] + i;
      acc += qlen[b];
      aq.data<std::int32_t>()[b] = static_cast<std::int32_t>(acc);
      ak.data<std::int32_t>()[b] = static_cast<std::int32_t>(kv[b]);
    }
    c.inputs[aq_name] = aq;
    c.inputs[ak_name] = ak;
  };
  meta(ql, kvl, 0, "actual_seq_lengths_query", "actual_seq_lengths_key");
  if (cp) {
    meta(qn, kvn, T0, "actual_seq_lengths_query_next", "actual_seq_lengths_key_next");
    c.inputs["positions"] = pos;
    c.attrs["cp_split"] = S("prev_next");
  }
  c.inputs["query"] = q;
  c.inputs["key"] = key;
  c.inputs["weights"] = w;
  c.inputs["block_table"] = bt;
}

}  // namespace

std::vector<Generator> generators() {
  return {{"li_npu.requests", "indexer.npu_lightning",
           "B requests (lists q_len, kv_len: rows at positions kv_len - q_len .. kv_len - 1; with q_len_next, kv_len_next "
           "a context-parallel split: those rows form the second half, cp_split=prev_next and inputs/positions written): "
           "bf16 (fp16: fp16) q and keys N(0,1) x U per row plus a shared component `shared`, weights 0.125 N(0,1) "
           "(wf32: f32); every cache slot filled, shuffled block ids, a spare block per request; dup_keys: exact ties and "
           "one-ulp near-ties among request 0's keys. dims H, D, bs",
           gen_requests}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "indexer.npu_lightning";
  const char* g = "li_npu.requests";
  return {
      {.name = "linpu_prefill_decode", .stage = st, .generator = g, .seed = 1401, .dims = {{"H", 64}, {"D", 128}, {"bs", 128}},
       .lists = {{"q_len", {4, 1}}, {"kv_len", {2304, 700}}},
       .doc = "V3.2 dims (64 heads, 128 dims, k 2048, 128-token blocks): a prefill chunk whose rows see 2301..2304 keys "
              "(> k: selection) and a decode row seeing 700 (< k: all sorted, -1 padded)"},
      {.name = "linpu_cp_split", .stage = st, .generator = g, .seed = 1402, .dims = {{"H", 64}, {"D", 128}, {"bs", 128}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {3, 130}}, {"q_len_next", {3, 2}}, {"kv_len_next", {300, 260}}},
       .doc = "do_npu_cp_balance_indexer: rows split at ceil(T/2) into two calls with their own metadata, global positions "
              "as provenance (the reference is the unsplit call); a fresh prefill whose first rows see 1..3 keys"},
      {.name = "linpu_ties_fp16", .stage = st, .generator = g, .seed = 1403, .dims = {{"H", 64}, {"D", 128}, {"bs", 64}},
       .lists = {{"q_len", {3}}, {"kv_len", {1200}}}, .params = {{"fp16", 1}, {"wf32", 1}, {"dup_keys", 1}},
       .attrs = {{"sparse_count", I(1024)}},
       .doc = "fp16 q/k with fp32 weights; exact ties (duplicated keys) and one-ulp near-ties everywhere, also at the "
              "k-th score (k 1024 of 1198..1200 keys)"},
      {.name = "linpu_nonfinite", .stage = st, .generator = g, .seed = 1404, .dims = {{"H", 64}, {"D", 128}, {"bs", 64}},
       .lists = {{"q_len", {3, 1}}, {"kv_len", {700, 90}}}, .attrs = {{"sparse_count", I(512)}},
       .poison = {{"weights", 0, 7, golden::kNaN}, {"query", 2, 100, golden::kInf}},
       .doc = "NaN policy: a NaN head weight makes every score of its row NaN (any selection of that row is accepted); "
              "an inf query element makes its head's dots +-inf: +inf scores (exact ties) rank first, NaN above them"},
  };
}

}  // namespace dsa::indexer::npu_lightning
