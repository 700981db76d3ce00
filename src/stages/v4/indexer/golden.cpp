// v4.indexer: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stages/v4/indexer/stage.hpp"

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

// vLLM's CUDA fp8 quant of one row (spec v4 §10): s = 2^ceil(log2(max(amax, 1e-4) / 448)), codes e4m3(x / s);
// returns s.
float fp8_row(const double* x, std::int64_t n, std::uint8_t* codes) {
  float amax = 1e-4f;
  for (std::int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(static_cast<float>(x[i])));
  const float sc = std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(amax / 448.0f))));
  for (std::int64_t i = 0; i < n; ++i) codes[i] = num::f64_to_e4m3(static_cast<double>(static_cast<float>(x[i]) / sc));
  return sc;
}

// The generator's three encodings (attr variant): a row of D values into the key / query tensors at `row`, returning
// the row's scale (1 for ref-bf16).
enum class Enc { a3, vllm, ref };
double encode_row(Enc e, const double* x, std::int64_t D, Tensor& codes, std::int64_t row) {
  switch (e) {
    case Enc::a3: return num::fp16_to_f32(quant_row(x, D, codes.data<std::int8_t>() + row * D));
    case Enc::vllm: return fp8_row(x, D, codes.data<std::uint8_t>() + row * D);
    default:
      for (std::int64_t d = 0; d < D; ++d) codes.data<std::uint16_t>()[row * D + d] = num::f64_to_bf16(x[d]);
      return 1.0;
  }
}

// One code of an encoded row moved to the next representable value (int8 value, e4m3 / bf16 bit pattern): a near-tie.
void nudge(Enc e, Tensor& codes, std::int64_t i) {
  if (e == Enc::a3) {
    std::int8_t& v = codes.data<std::int8_t>()[i];
    v = static_cast<std::int8_t>(v < 127 ? v + 1 : v - 1);
  } else if (e == Enc::vllm) {
    std::uint8_t& v = codes.data<std::uint8_t>()[i];
    v = static_cast<std::uint8_t>((v & 0x7F) >= 0x7E ? v - 1 : v + 1);  // never the NaN codes 0x7F / 0xFF
  } else {
    std::uint16_t& v = codes.data<std::uint16_t>()[i];
    v = static_cast<std::uint16_t>((v & 0x7F80) == 0x7F00 ? v - 1 : v + 1);
  }
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
  const Enc enc = s.param("vllm", 0) > 0 ? Enc::vllm : s.param("ref", 0) > 0 ? Enc::ref : Enc::a3;
  const DType code_dt = enc == Enc::a3 ? DType::int8 : enc == Enc::vllm ? DType::fp8_e4m3fn : DType::bf16;
  Tensor key(code_dt, {nblk, bs, 1, D}), ksc(enc == Enc::vllm ? DType::f32 : DType::fp16, {nblk, bs, 1, 1});
  auto set_ks = [&](std::int64_t sl, double v) {
    if (enc == Enc::vllm) ksc.data<float>()[sl] = static_cast<float>(v);
    else ksc.data<std::uint16_t>()[sl] = num::f32_to_fp16(static_cast<float>(v));  // exact: v came from fp16
  };
  std::vector<double> x(static_cast<std::size_t>(D));
  for (std::int64_t sl = 0; sl < nblk * bs; ++sl) {
    Rng r = root.fork(kKey).fork(static_cast<std::uint64_t>(sl));
    const double mag = r.uniform(0.5, 3.0);
    for (std::int64_t d = 0; d < D; ++d) x[static_cast<std::size_t>(d)] = mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]);
    set_ks(sl, encode_row(enc, x.data(), D, key, sl));
  }
  // Block tables: a shuffled pool of block ids.
  Tensor bt = dsa::engines::ascend_li::shuffled_block_table(root.fork(kPerm), blocks, maxblk, nblk);
  if (s.param("dup_keys", 0) > 0 && B > 0) {  // ties among request 0's entries
    auto slot = [&](std::int64_t j) { return static_cast<std::int64_t>(bt.data<std::int32_t>()[j / bs]) * bs + j % bs; };
    const std::int64_t es = dtype_size(code_dt), ss = dtype_size(ksc.dtype());
    std::byte* kb = key.raw();
    std::byte* sb = ksc.raw();
    for (std::int64_t j = 0; j + 2 < kvl[0] / 4; j += 4) {
      for (std::int64_t e = 1; e <= 2; ++e) {
        std::copy(kb + slot(j) * D * es, kb + (slot(j) + 1) * D * es, kb + slot(j + e) * D * es);
        std::copy(sb + slot(j) * ss, sb + (slot(j) + 1) * ss, sb + slot(j + e) * ss);
        if (e == 2) nudge(enc, key, slot(j + e) * D + j % D);
      }
    }
  }
  // Queries and head weights.
  Tensor q(code_dt, {T, H, D}), qs(DType::fp16, {T, H}), w(enc == Enc::vllm ? DType::f32 : enc == Enc::ref ? DType::bf16 : DType::fp16, {T, H});
  for (std::int64_t t = 0; t < T; ++t) {
    Rng r = root.fork(kQ).fork(static_cast<std::uint64_t>(t));
    Rng rw = root.fork(kW).fork(static_cast<std::uint64_t>(t));
    for (std::int64_t h = 0; h < H; ++h) {
      const double mag = r.uniform(0.2, 2.0);
      for (std::int64_t d = 0; d < D; ++d) x[static_cast<std::size_t>(d)] = mag * (r.normal() + shared * common[static_cast<std::size_t>(d)]);
      const double qscale = encode_row(enc, x.data(), D, q, t * H + h);
      const float wb = num::round_to_bf16(static_cast<float>(rw.normal()));
      if (enc == Enc::a3) {
        qs.data<std::uint16_t>()[t * H + h] = num::f32_to_fp16(static_cast<float>(qscale));
        // fp16(bf16(w) * 0.011048543456039806): the A3 weights prep of a bf16 weights_proj output
        w.data<std::uint16_t>()[t * H + h] = num::f32_to_fp16(num::round_to_bf16(wb * 0.011048543456039806f));
      } else if (enc == Enc::vllm) {  // fused_indexer_q_rope_quant: ((fp32(w) * s) * 128^-0.5) * 64^-0.5
        w.data<float>()[t * H + h] = (wb * static_cast<float>(qscale)) * 0.08838834764831845f * 0.125f;
      } else {
        w.data<std::uint16_t>()[t * H + h] = num::f32_to_bf16(wb * 0.011048543456039806f);
      }
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
  c.inputs["weights"] = w;
  c.inputs["key"] = key;
  if (enc == Enc::a3) c.inputs["query_dequant_scale"] = qs;
  if (enc != Enc::ref) c.inputs["key_dequant_scale"] = ksc;
  if (enc != Enc::a3) c.attrs["variant"] = S(enc == Enc::vllm ? "vllm-cuda" : "ref-bf16");
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
           "entries; vllm: e4m3 codes with pow2 fp32 scales (vLLM CUDA: the query scale folded into fp32 weights); "
           "ref: bf16 q/k/weights (the reference model). dims H, D, bs",
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
      {.name = "v4i_vllm_cuda_fp8", .stage = st, .generator = g, .seed = 1206, .dims = {{"H", 64}, {"D", 128}, {"bs", 64}},
       .lists = {{"q_len", {2, 4}}, {"kv_len", {2400, 1500}}}, .params = {{"vllm", 1}, {"dup_keys", 1}},
       .attrs = {{"sparse_count", I(512)}, {"sorted", I(0)}},
       .doc = "vLLM's CUDA path: e4m3 q (pow2 scale folded into fp32 weights) and k with fp32 pow2 row scales, DeepGEMM "
              "fp8 logits bounds, an unsorted top-k; duplicated keys (exact ties) and one-code near-ties"},
      {.name = "v4i_ref_bf16", .stage = st, .generator = g, .seed = 1207, .dims = {{"H", 64}, {"D", 128}, {"bs", 64}},
       .lists = {{"q_len", {3}}, {"kv_len", {2200}}}, .params = {{"ref", 1}, {"dup_keys", 1}}, .attrs = {{"sparse_count", I(512)}},
       .doc = "the reference model's bf16 scoring (every op a bf16 tensor): wide bands, many ties"},
      {.name = "v4i_pro_k1024", .stage = st, .generator = g, .seed = 1204, .dims = {{"H", 64}, {"D", 128}, {"bs", 128}},
       .lists = {{"q_len", {3}}, {"kv_len", {4500}}}, .attrs = {{"sparse_count", I(1024)}},
       .doc = "V4-Pro k = 1024, 128-slot blocks, nvis 1122..1125"},
  };
}

}  // namespace dsa::v4::indexer
