// v4.indexer_prolog: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "numerics/rope.hpp"
#include "stages/v4/indexer_prolog/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::indexer_prolog {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

enum Stream : std::uint64_t { kQ = 1, kW, kK, kCache, kSlots, kPlant };

// One bf16 row of n values: N(0,1) * U(0.05, 4); zero rows all 0.
void gen_row(Rng r, std::int64_t n, bool zero, std::uint16_t* dst) {
  if (zero) {
    std::fill(dst, dst + n, std::uint16_t{0});
    return;
  }
  const double mag = r.uniform(0.05, 4.0);
  for (std::int64_t i = 0; i < n; ++i) dst[i] = num::f64_to_bf16(mag * r.normal());
}

// dims T, H, D, R, nblk, bs; params zero_rows (1: q row (0, 1) and key row 1 all zero), pad_rows (every n-th key row padded: [-1, bs-1] / -1), flat (1: flat slots).
void gen_rows(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 8), H = s.dim("H", 64), D = s.dim("D", 128), R = s.dim("R", 6), bs = s.dim("bs", 16),
                     nblk = s.dim("nblk", 4);
  const bool zero = s.param("zero_rows", 0) > 0, flat = s.param("flat", 0) > 0;
  const auto pad = static_cast<std::int64_t>(s.param("pad_rows", 0));
  if (T > 0) {
    Tensor q(DType::bf16, {T, H, D}), w(DType::bf16, {T, H});
    for (std::int64_t i = 0; i < T * H; ++i)
      gen_row(root.fork(kQ).fork(static_cast<std::uint64_t>(i)), D, zero && i == 1, q.data<std::uint16_t>() + i * D);
    Rng rw = root.fork(kW);
    for (std::int64_t i = 0; i < T * H; ++i) w.data<std::uint16_t>()[i] = num::f64_to_bf16(rw.normal());
    if (s.param("pre", 0) > 0) {  // the path from q_pre: the V4 compressed-layer RoPE table (base 160000, YaRN 16)
      c.inputs["q_pre"] = q;
      dsa::num::YarnParams y;
      y.theta = 160000.0, y.factor = 16.0, y.original_seq_len = 65536, y.max_seq_len = 1 << 20;
      const auto f = dsa::num::yarn_inv_freqs(y);
      Tensor cs(DType::f32, {T, 64}), sn(DType::f32, {T, 64});
      Rng rp = root.fork(kPlant);
      for (std::int64_t t = 0; t < T; ++t) {
        float cv[32], sv[32];
        dsa::num::yarn_cos_sin(f, rp.randint(0, 200000), cv, sv);
        for (int i = 0; i < 64; ++i) cs.data<float>()[t * 64 + i] = cv[i / 2], sn.data<float>()[t * 64 + i] = sv[i / 2];
      }
      c.inputs["rope_cos"] = cs;
      c.inputs["rope_sin"] = sn;
    } else {
      c.inputs["q"] = q;
    }
    c.inputs["weights"] = w;
  }
  if (R > 0) {
    Tensor k(DType::bf16, {R, D});
    for (std::int64_t r = 0; r < R; ++r)
      gen_row(root.fork(kK).fork(static_cast<std::uint64_t>(r)), D, zero && r == 1, k.data<std::uint16_t>() + r * D);
    Tensor kc(DType::int8, {nblk, bs, 1, D}), ksc(DType::fp16, {nblk, bs, 1, 1});
    Rng rc = root.fork(kCache);
    for (std::int64_t i = 0; i < kc.numel(); ++i) kc.data<std::int8_t>()[i] = static_cast<std::int8_t>(rc.randint(-127, 127));
    for (std::int64_t i = 0; i < ksc.numel(); ++i) ksc.data<std::uint16_t>()[i] = num::f32_to_fp16(static_cast<float>(rc.uniform(0.001, 0.05)));
    // Distinct slots from a shuffled pool; every pad-th row padded.
    std::vector<std::int64_t> pool(static_cast<std::size_t>(nblk * bs));
    std::iota(pool.begin(), pool.end(), 0);
    Rng rs = root.fork(kSlots);
    for (std::size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[static_cast<std::size_t>(rs.randint(0, static_cast<std::int64_t>(i) - 1))]);
    Tensor sm = flat ? Tensor(DType::i32, {R}) : Tensor(DType::i32, {R, 2});
    for (std::int64_t r = 0; r < R; ++r) {
      const bool padded = pad > 0 && r % pad == pad - 1;
      const std::int64_t slot = pool[static_cast<std::size_t>(r)];
      if (flat) sm.data<std::int32_t>()[r] = padded ? -1 : static_cast<std::int32_t>(slot);
      else {
        sm.data<std::int32_t>()[2 * r] = padded ? -1 : static_cast<std::int32_t>(slot / bs);
        sm.data<std::int32_t>()[2 * r + 1] = static_cast<std::int32_t>(padded ? bs - 1 : slot % bs);
      }
    }
    c.inputs["k"] = k;
    c.inputs["slot_mapping"] = sm;
    c.inputs["k_cache_in"] = kc;
    c.inputs["k_scale_cache_in"] = ksc;
  }
}

// Kernel vllm-cuda (fused_indexer_q_rope_quant): index_q [T, H, 128] bf16 rows as gen_rows', row (0, 0) all zero
// (amax below the 1e-4 floor) and row (0, 1) with its rope dims x 64 (the rope dims set amax); positions uniform in
// [0, P); cos_sin_cache [P, 64] fp32 (cos 32 | sin 32) of the V4 YaRN table; index_weights bf16 N(0,1).
void gen_vllm_q(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 4), H = s.dim("H", 64), D = 128, P = s.dim("P", 4096);
  Tensor q(DType::bf16, {T, H, D}), w(DType::bf16, {T, H}), pos(DType::i64, {T}), cache(DType::f32, {P, 64});
  for (std::int64_t i = 0; i < T * H; ++i)
    gen_row(root.fork(kQ).fork(static_cast<std::uint64_t>(i)), D, i == 0, q.data<std::uint16_t>() + i * D);
  if (T * H > 1)
    for (std::int64_t d = 64; d < D; ++d)
      q.data<std::uint16_t>()[D + d] = num::f32_to_bf16(num::bf16_to_f32(q.data<std::uint16_t>()[D + d]) * 64.0f);
  Rng rw = root.fork(kW);
  for (std::int64_t i = 0; i < T * H; ++i) w.data<std::uint16_t>()[i] = num::f64_to_bf16(rw.normal());
  Rng rp = root.fork(kPlant);
  for (std::int64_t t = 0; t < T; ++t) pos.data<std::int64_t>()[t] = rp.randint(0, P - 1);
  dsa::num::YarnParams y;
  y.theta = 160000.0, y.factor = 16.0, y.original_seq_len = 65536, y.max_seq_len = 1 << 20;
  const auto f = dsa::num::yarn_inv_freqs(y);
  for (std::int64_t p = 0; p < P; ++p) dsa::num::yarn_cos_sin(f, p, cache.data<float>() + p * 64, cache.data<float>() + p * 64 + 32);
  c.inputs = {{"index_q", q}, {"positions", pos}, {"cos_sin_cache", cache}, {"index_weights", w}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4ip.vllm_q", "v4.indexer_prolog",
           "kernel vllm-cuda's fp8 indexer q path: index_q [T, H, 128] bf16 N(0,1) x U(0.05, 4) per row, row (0, 0) "
           "all zero, row (0, 1) with its rope dims x 64; positions uniform in [0, P); cos_sin_cache [P, 64] fp32 of "
           "the V4 YaRN table (cos 32 | sin 32); index_weights bf16 N(0,1). dims T, H, P",
           gen_vllm_q},
          {"v4ip.rows", "v4.indexer_prolog",
           "rotated q [T,H,D] and key rows [R,D] bf16 N(0,1) x U(0.05, 4) per row; zero_rows: an all-zero q and k "
           "row; weights bf16 N(0,1); caches of junk int8 / fp16 scales; distinct shuffled slots, every pad_rows-th key "
           "row padded ([-1, bs-1], or -1 with flat); pre: the query given before RoPE + Hadamard (q_pre) with a V4 "
           "RoPE table row (base 160000, YaRN 16, interleave-duplicated [T, 64]) at a random position per token. "
           "dims T, H, D, R, nblk, bs",
           gen_rows}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v4.indexer_prolog";
  const char* g = "v4ip.rows";
  return {
      {.name = "v4ip_a3_pairs", .stage = st, .generator = g, .seed = 1301,
       .dims = {{"T", 6}, {"H", 64}, {"D", 128}, {"R", 24}, {"nblk", 3}, {"bs", 16}},
       .params = {{"zero_rows", 1}, {"pad_rows", 5}},
       .doc = "V4-Flash dims (64 heads x 128): all-zero rows (amax_zero=scale1), padded key rows [-1, bs-1] skipped, "
              "[block, offset] slots"},
      {.name = "v4ip_kernel_amax0_flat", .stage = st, .generator = g, .seed = 1302,
       .dims = {{"T", 2}, {"H", 64}, {"D", 128}, {"R", 10}, {"nblk", 2}, {"bs", 16}},
       .params = {{"zero_rows", 1}, {"pad_rows", 4}, {"flat", 1}}, .attrs = {{"amax_zero", S("scale0")}},
       .poison = {{"q", 1, 9, golden::kNaN}, {"k", 3, 0, golden::kInf}},
       .doc = "the kernel's amax = 0 arithmetic (scale 0), flat slots with -1 padding; NaN policy: a NaN in a row gives a NaN "
              "scale and zero codes, an inf an inf scale and zero codes"},
      {.name = "v4ip_qpath_ascend", .stage = st, .generator = g, .seed = 1303,
       .dims = {{"T", 4}, {"H", 64}, {"D", 128}, {"R", 0}},
       .params = {{"pre", 1}}, .attrs = {{"hadamard", S("ascend")}},
       .doc = "the query path from the wq_b output: interleaved RoPE on the last 64 dims with a V4 table, bf16(q @ H^T), "
              "bf16(x 128^-0.5), then the int8 quant; values whose rounding the kernel's fp32 order decides carry a bound"},
      {.name = "v41ip_vllm_q_mxfp4", .stage = st, .generator = "v4ip.vllm_q", .seed = 1306, .dims = {{"T", 2}, {"H", 32}, {"P", 16}},
       .attrs = {{"kernel", S("vllm-cuda")}, {"q_format", S("mxfp4")}},
       .doc = "kernel vllm-cuda, DeepSeek-V4.1's MXFP4 q path (fused_indexer_q_rope_quant use_fp4): 32 heads (weights folded "
              "by 128^-0.5 * 32^-0.5 = 2^-6 exactly), the nope blocks from bf16, the GPT-J RoPE dims rounded to bf16, 4 "
              "ue8m0 blocks per head; an all-zero head (scale byte 1, the 6*2^-126 floor)"},
      {.name = "v4ip_vllm_q", .stage = st, .generator = "v4ip.vllm_q", .seed = 1305, .dims = {{"T", 6}, {"H", 64}, {"P", 160}},
       .attrs = {{"kernel", S("vllm-cuda")}},
       .doc = "kernel vllm-cuda: fused_indexer_q_rope_quant FP8 (GPT-J RoPE at each token's position, pow2 scale by IEEE "
              "divide, e4m3 codes, the scale folded into the fp32 weights; no Hadamard); an all-zero row (1e-4 floor) "
              "and a row whose rope dims set amax"},
      {.name = "v4ip_qpath_fwht", .stage = st, .generator = g, .seed = 1304,
       .dims = {{"T", 2}, {"H", 64}, {"D", 128}, {"R", 0}},
       .params = {{"pre", 1}}, .attrs = {{"hadamard", S("fwht")}},
       .doc = "the reference model's rotation: the fp32 FWHT in its butterfly order (exact unless a RoPE value is "
              "uncertain)"},
  };
}

}  // namespace dsa::v4::indexer_prolog
