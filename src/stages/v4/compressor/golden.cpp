// v4.compressor: input generator and golden catalogue rows (docs/golden.md).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "numerics/rope.hpp"
#include "stages/v4/compressor/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::compressor {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;


namespace {

enum Stream : std::uint64_t { kX = 1, kWkv, kWg, kApe, kGamma, kPerm, kZero };

std::int64_t attr_i(const GoldenSpec& s, const char* k, std::int64_t def) {
  auto it = s.attrs.find(k);
  return it == s.attrs.end() ? def : std::get<std::int64_t>(it->second);
}

// dims D, H, bs; lists start_pos, q_len; params projections (1: kv_proj/score_proj inputs), zero_blocks (1: table
// entries 0 where nothing is read: early blocks and one block of the step's own tokens).
void gen_steps(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const std::int64_t D = s.dim("D", 128), H = s.dim("H", 64), bs = s.dim("bs", 8);
  const std::int64_t r = attr_i(s, "cmp_ratio", 4), coff = attr_i(s, "coff", 2), mode = attr_i(s, "cache_mode", 1), rope = 64;
  const std::int64_t C2 = coff * D, W = 2 * C2;
  auto it_model = s.attrs.find("model");
  const bool v41 = it_model != s.attrs.end() && std::get<std::string>(it_model->second) == "v41";
  const bool have_ape = !v41, have_gate = r != 1;  // V4.1: no APE; ratio 1: no gate
  const std::int64_t ring = attr_i(s, "ring_rows", coff * r);
  const auto& s0 = s.list("start_pos");
  const auto& ql = s.list("q_len");
  const std::int64_t B = static_cast<std::int64_t>(s0.size());
  std::int64_t T = 0, emitted = 0;
  for (std::int64_t b = 0; b < B; ++b) T += ql[b], emitted += (s0[b] + ql[b]) / r - s0[b] / r;
  const std::int64_t R = std::max(emitted, std::min(T, T / r + B));
  // Weights and activations (x of every position of a request, also the earlier ones behind the state rows).
  auto bf = [](double v) { return num::f64_to_bf16(v); };
  Tensor wkv(DType::bf16, {C2, H}), wg(DType::bf16, {C2, H}), ape(DType::f32, {r, C2}), gamma(DType::bf16, {D});
  {
    Rng a = root.fork(kWkv), g = root.fork(kWg), e = root.fork(kApe), n = root.fork(kGamma);
    const double sw = 1.0 / std::sqrt(static_cast<double>(H));
    for (std::int64_t i = 0; i < C2 * H; ++i) wkv.data<std::uint16_t>()[i] = bf(sw * a.normal()), wg.data<std::uint16_t>()[i] = bf(sw * g.normal());
    for (std::int64_t i = 0; i < r * C2; ++i) ape.data<float>()[i] = static_cast<float>(0.5 * e.normal());
    for (std::int64_t i = 0; i < D; ++i) gamma.data<std::uint16_t>()[i] = bf(1.0 + 0.1 * n.normal());
  }
  auto xrow = [&](std::int64_t b, std::int64_t pos, std::uint16_t* dst) {
    Rng rr = root.fork(kX).fork(static_cast<std::uint64_t>(b)).fork(static_cast<std::uint64_t>(pos));
    for (std::int64_t h = 0; h < H; ++h) dst[h] = bf(rr.normal());
  };
  auto project = [&](const std::uint16_t* x, std::int64_t o, const Tensor& w) {
    double acc = 0;
    for (std::int64_t h = 0; h < H; ++h) acc += num::bf16_to_f64(x[h]) * num::bf16_to_f64(w.data<std::uint16_t>()[o * H + h]);
    return acc;
  };
  // State block table: distinct block ids >= 1 (shuffled), per request the blocks its positions (or its ring) need.
  std::vector<std::int64_t> need(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) need[b] = mode == 2 ? (ring + bs - 1) / bs : (s0[b] + ql[b] + bs - 1) / bs;
  const std::int64_t maxblk = *std::max_element(need.begin(), need.end());
  std::int64_t total = 0;
  for (auto n : need) total += n;
  const std::int64_t nblk = total + 1;
  std::vector<std::int64_t> ids(static_cast<std::size_t>(total));
  for (std::int64_t i = 0; i < total; ++i) ids[i] = i + 1;
  {
    Rng pr = root.fork(kPerm);
    for (std::int64_t i = total - 1; i > 0; --i) std::swap(ids[i], ids[pr.randint(0, i)]);
  }
  Tensor tab(DType::i32, {B, maxblk});
  std::int64_t next = 0;
  const bool zero_blocks = s.param("zero_blocks", 0) != 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t k = 0; k < maxblk; ++k) {
      std::int32_t id = k < need[b] ? static_cast<std::int32_t>(ids[next++]) : 0;
      if (zero_blocks && mode == 1 && k < need[b]) {
        const std::int64_t read_lo = std::max<std::int64_t>(0, (s0[b] / r - (coff - 1)) * r);
        const bool before_reads = (k + 1) * bs <= read_lo;
        const bool last_of_step = k == need[b] - 1 && k * bs >= s0[b] && b % 2 == 1;  // written only, never read here
        if (before_reads || last_of_step) id = 0;
      }
      tab.data<std::int32_t>()[b * maxblk + k] = id;
    }
  // State rows before the step: NaN everywhere (block 0 included: a read of it shows), then the rows of the positions
  // this step reads, as a correct previous step wrote them.
  Tensor st(DType::f32, {nblk, bs, W});
  std::fill_n(st.data<float>(), st.numel(), std::numeric_limits<float>::quiet_NaN());
  std::vector<std::uint16_t> xb(static_cast<std::size_t>(H));
  Params pp;
  pp.r = r, pp.coff = coff, pp.bs = bs, pp.maxblk = maxblk, pp.cache_mode = static_cast<int>(mode), pp.ring = ring;
  for (std::int64_t b = 0; b < B; ++b) {
    const std::int64_t read_lo = std::max<std::int64_t>(0, (s0[b] / r - (coff - 1)) * r);
    for (std::int64_t ps = read_lo; ps < s0[b]; ++ps) {
      const Slot sl = state_slot(pp, tab.data<std::int32_t>() + b * maxblk, ps);
      if (sl.block <= 0) continue;
      xrow(b, ps, xb.data());
      float* row = st.data<float>() + (sl.block * bs + sl.offset) * W;
      for (std::int64_t o = 0; o < C2; ++o) {
        row[o] = static_cast<float>(project(xb.data(), o, wkv));
        const float g = have_gate ? static_cast<float>(project(xb.data(), o, wg)) : 0.0f;
        row[C2 + o] = have_ape ? g + ape.data<float>()[(ps % r) * C2 + o] : g;
      }
    }
  }
  // This step's tokens.
  Tensor x(DType::bf16, {T, H}), cu(DType::i32, {B + 1}), sp(DType::i32, {B});
  std::int64_t t = 0;
  cu.data<std::int32_t>()[0] = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    sp.data<std::int32_t>()[b] = static_cast<std::int32_t>(s0[b]);
    for (std::int64_t i = 0; i < ql[b]; ++i, ++t) xrow(b, s0[b] + i, x.data<std::uint16_t>() + t * H);
    cu.data<std::int32_t>()[b + 1] = static_cast<std::int32_t>(t);
  }
  // RoPE rows: position jr of each emitted entry, request by request; padding rows cos 1, sin 0.
  Tensor rs(DType::f32, {R, rope}), rc(DType::f32, {R, rope});
  std::fill_n(rc.data<float>(), rc.numel(), 1.0f);
  std::fill_n(rs.data<float>(), rs.numel(), 0.0f);
  std::int64_t row = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = s0[b] / r; j < (s0[b] + ql[b]) / r; ++j, ++row)
      num::v4_rope_row(rope, j * r, rc.data<float>() + row * rope, rs.data<float>() + row * rope);
  c.inputs = {{"norm_weight", gamma}, {"rope_sin", rs}, {"rope_cos", rc}, {"state_cache_in", st},
              {"state_block_table", tab}, {"cu_seqlens", cu}, {"start_pos", sp}};
  if (have_ape) c.inputs["ape"] = ape;
  if (s.param("projections", 0) != 0) {
    Tensor kp(DType::f32, {T, C2}), sc(DType::f32, {T, C2});
    for (std::int64_t k = 0; k < T; ++k)
      for (std::int64_t o = 0; o < C2; ++o) {
        kp.data<float>()[k * C2 + o] = static_cast<float>(project(x.data<std::uint16_t>() + k * H, o, wkv));
        sc.data<float>()[k * C2 + o] = static_cast<float>(project(x.data<std::uint16_t>() + k * H, o, wg));
      }
    c.inputs["kv_proj"] = kp;
    if (have_gate) c.inputs["score_proj"] = sc;
  } else {
    c.inputs["x"] = x;
    c.inputs["wkv"] = wkv;
    if (have_gate) c.inputs["wgate"] = wg;
  }
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4c.step", "v4.compressor",
           "one compressor step of B requests (lists start_pos, q_len: mid-group starts): x bf16 N(0,1) per (request, "
           "position), wkv/wgate bf16 N(0, 1/H), ape N(0, 0.25), gamma 1 + N(0, 0.01); state rows of the positions the "
           "step reads written as a correct previous step would, every other state row NaN (block 0 included); "
           "shuffled block ids; zero_blocks: table entries 0 where nothing is read; projections: kv_proj/score_proj "
           "inputs instead of x + weights; RoPE rows at jr (V4 YaRN, base 160000). dims D, H, bs; attrs cmp_ratio, coff, "
           "cache_mode, ring_rows; model v41: no ape, and no gate at cmp_ratio 1",
           gen_steps}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "v4.compressor";
  const char* g = "v4c.step";
  return {
      {.name = "v4c4_ascend_midgroup", .stage = st, .generator = g, .seed = 901, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {5, 0, 11, 2}}, {"q_len", {7, 9, 2, 1}}}, .params = {{"zero_blocks", 1}},
       .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}},
       .doc = "C4 overlap, requests starting mid-group (state rows of the previous and current group read back), "
              "j = 0 with no previous group, a 1-token step that emits nothing, block id 0 entries (not written)"},
      {.name = "v4c4_indexer_rotate", .stage = st, .generator = g, .seed = 902, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {3, 8}}, {"q_len", {10, 4}}}, .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}, {"rotate", I(1)}},
       .doc = "the indexer compressor (D 128, rotate): Hadamard-128 after the cast with the Ascend double bf16 rounding"},
      {.name = "v4c4_ref_qat", .stage = st, .generator = g, .seed = 903, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {6, 1}}, {"q_len", {9, 7}}}, .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}, {"variant", S("ref")}},
       .doc = "DeepSeek reference numerics: pooled kv -> bf16, RMSNorm x*rsqrt, FP8 ue8m0 QAT of the nope dims"},
      {.name = "v4c128_cycle", .stage = st, .generator = g, .seed = 904, .dims = {{"D", 128}, {"H", 32}, {"bs", 32}},
       .lists = {{"start_pos", {100, 250}}, {"q_len", {30, 10}}},
       .attrs = {{"cmp_ratio", I(128)}, {"coff", I(1)}, {"cache_mode", I(2)}},
       .doc = "C128 (no overlap) with the cycle ring state cache (128-token ring in 32-token blocks): 100 and 250 state "
              "rows of the group read back from the ring"},
      {.name = "v4c4_projections_vllm", .stage = st, .generator = g, .seed = 905, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {0, 7}}, {"q_len", {12, 6}}}, .params = {{"projections", 1}},
       .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}, {"variant", S("vllm-cuda")}},
       .poison = {{"kv_proj", 3, 5, golden::kNaN}, {"score_proj", 14, 200, golden::kInf}},
       .doc = "per-token projections as inputs (no GEMM bound: the state rows must be exact) and vLLM's fp32 pipeline "
              "with FP8 QAT of the nope dims; NaN policy: a NaN kv and a +inf score make their entries' rows NaN"},
      {.name = "v41c2_ref_nvfp4", .stage = st, .generator = g, .seed = 911, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {3, 0, 6, 9}}, {"q_len", {6, 5, 1, 8}}}, .params = {{"zero_blocks", 1}},
       .attrs = {{"cmp_ratio", I(2)}, {"coff", I(1)}, {"model", S("v41")}, {"variant", S("ref")}},
       .doc = "DeepSeek-V4.1 ratio 2 (pairs, no overlap, no APE) with the reference's numerics: pooled -> bf16, bf16 norm "
              "and RoPE, NVFP4 QAT (e4m3 scales, blocks of 16) of all dims; odd starts read the pair's first row back, a "
              "1-token step emits nothing"},
      {.name = "v41c1_vllm_nvfp4", .stage = st, .generator = g, .seed = 912, .dims = {{"D", 128}, {"H", 64}, {"bs", 8}},
       .lists = {{"start_pos", {0, 5}}, {"q_len", {7, 3}}}, .params = {{"projections", 1}},
       .attrs = {{"cmp_ratio", I(1)}, {"coff", I(1)}, {"model", S("v41")}, {"variant", S("vllm-cuda")}},
       .poison = {{"kv_proj", 4, 17, golden::kNaN}},
       .doc = "DeepSeek-V4.1 ratio 1 (no gate: kv_proj only) on vLLM's path: the bf16 Linear's value, fp32 norm and RoPE, "
              "NVFP4 with vLLM's rule from the unrounded fp32 result; a NaN projection makes its row NaN (the norm mixes every channel)"},
      {.name = "v41c2_ascend_ring32", .stage = st, .generator = g, .seed = 913, .dims = {{"D", 128}, {"H", 32}, {"bs", 8}},
       .lists = {{"start_pos", {41, 96}}, {"q_len", {7, 4}}},
       .attrs = {{"cmp_ratio", I(2)}, {"coff", I(1)}, {"model", S("v41")}, {"cache_mode", I(2)}, {"ring_rows", I(32)}},
       .doc = "the Ascend compressor_v2 (bf16 out) with its 32-row state ring per request: row p mod 32, positions past "
              "the ring's first turn, an odd start reading its pair's first row back from the ring"},
      {.name = "v4c4_flash_full", .stage = st, .generator = g, .seed = 906, .dims = {{"D", 512}, {"H", 4096}, {"bs", 8}},
       .lists = {{"start_pos", {0, 13}}, {"q_len", {256, 40}}}, .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}}, .committed = false,
       .doc = "V4-Flash dims (D 512, H 4096): a 256-token prefill and a mid-group continuation"},
      {.name = "v4c4_prefill_32k", .stage = st, .generator = g, .seed = 908, .dims = {{"D", 512}, {"H", 4096}, {"bs", 8}},
       .lists = {{"start_pos", {0}}, {"q_len", {32768}}}, .attrs = {{"cmp_ratio", I(4)}, {"coff", I(2)}}, .committed = false,
       .doc = "the benchmark: a 32K-token prefill of one V4-Flash C4 layer (scripts/bench.sh)"},
      {.name = "v4c128_flash_full", .stage = st, .generator = g, .seed = 907, .dims = {{"D", 512}, {"H", 4096}, {"bs", 32}},
       .lists = {{"start_pos", {0}}, {"q_len", {300}}}, .attrs = {{"cmp_ratio", I(128)}, {"coff", I(1)}}, .committed = false,
       .doc = "V4-Flash C128 layer: a 300-token prefill (2 entries, a partial group left in the state)"},
  };
}

}  // namespace dsa::v4::compressor
