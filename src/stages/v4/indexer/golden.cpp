// v4.indexer: input generator and golden catalogue rows (README "Golden data").
#include <algorithm>
#include <cmath>
#include <numeric>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stages/v4/indexer/core.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::indexer {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kQ = 1, kW, kKey, kPerm };

// dynamic_quant_int8 of one row of n values (spec v4 §3.4): scale = amax * fl32(1/127), codes rint(x * (127 / amax))
// in fp32; the fp16 scale.
std::uint16_t quant_row(const double* x, std::int64_t n, std::int8_t* codes) {
  float amax = 0;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<float>(x[i])));
  if (amax == 0) amax = 1;  // (the kernel's amax = 0 behaviour is not modelled by the generator)
  const float inv = 127.0f / amax;
  for (std::int64_t i = 0; i < n; ++i)
    codes[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(static_cast<float>(x[i]) * inv), -127.0f, 127.0f));
  return num::f32_to_fp16(amax * (1.0f / 127.0f));
}

// dims H, D, bs; lists q_len, kv_len (per request); params dup_keys (1: request 0's entries 4m+1 copy entry 4m:
// exact score ties; entries 4m+2 copy 4m with one code moved by 1: near-ties), shared (weight of a component shared by
// every key and query, which spreads the scores). Every cache slot is filled (slots no request reads hold junk that
// must not be read); block ids shuffled, one spare block per request beyond what it reads.
void gen_requests(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t H = s.dim("H", 64), D = s.dim("D", 128), bs = s.dim("bs", 64);
  const auto& ql = s.list("q_len");
  const auto& kvl = s.list("kv_len");
  const std::int64_t B = static_cast<std::int64_t>(ql.size());
  const double shared = s.param("shared", 0.5);
  std::int64_t T = 0, maxblk = 1, nblk = 2;
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    T += ql[b];
    blocks[static_cast<std::size_t>(b)] = (kvl[b] / 4 + bs - 1) / bs + 1;
    maxblk = std::max(maxblk, blocks[static_cast<std::size_t>(b)]);
    nblk += blocks[static_cast<std::size_t>(b)];
  }
  std::vector<double> common(static_cast<std::size_t>(D));
  {
    Rng r = root.fork(kQ).fork(0xC0);
    for (auto& v : common) v = r.normal();
  }
  // Key cache: every slot, junk included.
  Tensor key(DType::int8, {nblk, bs, 1, D}), ksc(DType::fp16, {nblk, bs, 1, 1});
  std::vector<double> x(static_cast<std::size_t>(D));
  for (std::int64_t sl = 0; sl < nblk * bs; ++sl) {
    Rng r = root.fork(kKey).fork(static_cast<std::uint64_t>(sl));
    const double mag = r.uniform(0.5, 3.0);
    for (std::int64_t d = 0; d < D; ++d) x[static_cast<std::size_t>(d)] = mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]);
    ksc.data<std::uint16_t>()[sl] = quant_row(x.data(), D, key.data<std::int8_t>() + sl * D);
  }
  // Block tables: a shuffled pool of block ids.
  Tensor bt = dsa::indexer::ascend_li::shuffled_block_table(root.fork(kPerm), blocks, maxblk, nblk);
  if (s.param("dup_keys", 0) > 0 && B > 0) {  // ties among request 0's entries
    auto slot = [&](std::int64_t j) { return static_cast<std::int64_t>(bt.data<std::int32_t>()[j / bs]) * bs + j % bs; };
    for (std::int64_t j = 0; j + 2 < kvl[0] / 4; j += 4) {
      std::int8_t* k0 = key.data<std::int8_t>() + slot(j) * D;
      for (std::int64_t e = 1; e <= 2; ++e) {
        std::int8_t* kc = key.data<std::int8_t>() + slot(j + e) * D;
        std::copy(k0, k0 + D, kc);
        ksc.data<std::uint16_t>()[slot(j + e)] = ksc.data<std::uint16_t>()[slot(j)];
        if (e == 2) kc[j % D] = static_cast<std::int8_t>(kc[j % D] < 127 ? kc[j % D] + 1 : kc[j % D] - 1);
      }
    }
  }
  // Queries and head weights.
  Tensor q(DType::int8, {T, H, D}), qs(DType::fp16, {T, H}), w(DType::fp16, {T, H});
  for (std::int64_t t = 0; t < T; ++t) {
    Rng r = root.fork(kQ).fork(static_cast<std::uint64_t>(t));
    Rng rw = root.fork(kW).fork(static_cast<std::uint64_t>(t));
    for (std::int64_t h = 0; h < H; ++h) {
      const double mag = r.uniform(0.2, 2.0);
      for (std::int64_t d = 0; d < D; ++d) x[static_cast<std::size_t>(d)] = mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]);
      qs.data<std::uint16_t>()[t * H + h] = quant_row(x.data(), D, q.data<std::int8_t>() + (t * H + h) * D);
      // fp16(bf16(w) * 0.011048543456039806): the A3 weights prep of a bf16 weights_proj output
      const float wb = num::round_to_bf16(static_cast<float>(rw.normal()));
      w.data<std::uint16_t>()[t * H + h] = num::f32_to_fp16(num::round_to_bf16(wb * 0.011048543456039806f));
    }
  }
  Tensor aq(DType::i32, {B}), ak(DType::i32, {B});
  std::int64_t acc = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    acc += ql[b];
    aq.data<std::int32_t>()[b] = static_cast<std::int32_t>(acc);
    ak.data<std::int32_t>()[b] = static_cast<std::int32_t>(kvl[b]);
  }
  c.inputs["query"] = q;
  c.inputs["query_dequant_scale"] = qs;
  c.inputs["weights"] = w;
  c.inputs["key"] = key;
  c.inputs["key_dequant_scale"] = ksc;
  c.inputs["block_table"] = bt;
  c.inputs["actual_seq_lengths_query"] = aq;
  c.inputs["actual_seq_lengths_key"] = ak;
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4i.requests", "v4.indexer",
           "B requests (lists q_len, kv_len: rows at positions kv_len - q_len .. kv_len - 1): int8 codes by "
           "dynamic_quant_int8 of N(0,1) rows (per-row magnitudes, a shared component `shared`), fp16 scales, weights "
           "fp16(bf16(bf16(N(0,1)) * 0.0110485)); every cache slot filled (junk where no request reads), shuffled "
           "block ids, a spare block per request; dup_keys: exact ties and one-code near-ties among request 0's "
           "entries. dims H, D, bs",
           gen_requests}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v4.indexer";
  const char* g = "v4i.requests";
  return {
      {.name = "v4i_flash_decode_mtp", .stage = st, .generator = g, .seed = 1201, .dims = {{"H", 64}, {"D", 128}, {"bs", 64}},
       .lists = {{"q_len", {2, 2, 2}}, {"kv_len", {2300, 3101, 601}}}, .attrs = {{"sparse_count", I(512)}},
       .doc = "V4-Flash dims (64 heads, 128 dims, k 512, 64-slot blocks): MTP decode rows (2 per request), nvis 575 / "
              "775 / 150 around k"},
      {.name = "v4i_prefill_chunked_short", .stage = st, .generator = g, .seed = 1202, .dims = {{"H", 64}, {"D", 128}, {"bs", 16}},
       .lists = {{"q_len", {24, 9}}, {"kv_len", {2080, 9}}}, .attrs = {{"sparse_count", I(512)}},
       .doc = "a chunked prefill crossing nvis = k (514..520) and a fresh 9-token prefill whose first rows see no "
              "entry (nvis 0: whole row -1), 16-slot blocks"},
      {.name = "v4i_ties", .stage = st, .generator = g, .seed = 1203, .dims = {{"H", 64}, {"D", 128}, {"bs", 32}},
       .lists = {{"q_len", {4}}, {"kv_len", {2200}}}, .params = {{"dup_keys", 1}}, .attrs = {{"sparse_count", I(512)}},
       .doc = "exact ties (duplicated entries) and near-ties (one code apart) everywhere, also at the k-th score"},
      {.name = "v4i_nonfinite", .stage = st, .generator = g, .seed = 1205, .dims = {{"H", 64}, {"D", 128}, {"bs", 16}},
       .lists = {{"q_len", {2, 3}}, {"kv_len", {2100, 700}}}, .attrs = {{"sparse_count", I(512)}},
       .poison = {{"weights", 0, 5, golden::kNaN}, {"query_dequant_scale", 3, 7, golden::kInf}},
       .doc = "NaN policy: a NaN head weight makes every score of its row NaN (any selection of that row is accepted); "
              "an inf query scale makes its row's scores +-inf or NaN (0 * inf): NaN ranks first, then +inf"},
      {.name = "v4i_pro_k1024", .stage = st, .generator = g, .seed = 1204, .dims = {{"H", 64}, {"D", 128}, {"bs", 128}},
       .lists = {{"q_len", {3}}, {"kv_len", {4500}}}, .attrs = {{"sparse_count", I(1024)}},
       .doc = "V4-Pro k = 1024, 128-slot blocks, nvis 1122..1125"},
  };
}

}  // namespace dsa::v4::indexer
