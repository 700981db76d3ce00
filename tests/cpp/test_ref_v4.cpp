// v4.compressor: the properties the issue asks of any correct compressor, checked on the reference itself:
// prefill == chunked steps == token-by-token decode through the state cache (bit-identical rows), batch invariance,
// cycle ring == continuous state; and the structural errors of a step.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "numerics/rope.hpp"
#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "ref_test_util.hpp"
#include "stages/v4/compressor/stage.hpp"

using namespace dsa;

namespace {

struct Req {
  std::int64_t id;
  std::vector<float> kv, sc;  // per position: C2 values
};

constexpr std::int64_t kD = 128, kC2 = 256, kR = 4, kBs = 8, kBlocks = 8;

Req make_req(std::int64_t id, std::int64_t n) {
  Req q{id, std::vector<float>(static_cast<std::size_t>(n * kC2)), std::vector<float>(static_cast<std::size_t>(n * kC2))};
  Rng r(100 + static_cast<std::uint64_t>(id));
  for (auto& v : q.kv) v = static_cast<float>(r.normal());
  for (auto& v : q.sc) v = static_cast<float>(2.0 * r.normal());
  return q;
}

// The compressor instance of a test: V4 C4 (default) or a DeepSeek-V4.1 one (ratio 1 / 2, no APE, ratio 1 without a
// gate, a state ring of `ring` rows).
struct Cfg {
  std::int64_t r = kR, coff = 2;
  bool v41 = false;
  std::string variant;  // empty: the stage's default
  std::int64_t ring = 0;  // cache_mode 2: attr ring_rows (0: not set)
  std::int64_t C2() const { return coff * kD; }
};

Tensor shared_ape() {
  Tensor t(DType::f32, {kR, kC2});
  Rng r(7);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(0.5 * r.normal());
  return t;
}

// One step: requests `rs` with [start, start+len) each; state blocks: request k owns blocks 1 + k*kBlocks ...
// (cycle mode: the first 1 block-set of the ring). Returns the case (inputs set).
Case step(const std::vector<const Req*>& rs, const std::vector<std::int64_t>& start, const std::vector<std::int64_t>& len,
          const Tensor& state_in, int cache_mode = 1, const Cfg& cf = {}) {
  Case c;
  c.file = "mem", c.name = "step", c.stage = "v4.compressor";
  const std::int64_t B = static_cast<std::int64_t>(rs.size()), r = cf.r, C2 = cf.C2();
  std::int64_t T = 0, emitted = 0;
  for (std::int64_t b = 0; b < B; ++b) T += len[b], emitted += (start[b] + len[b]) / r - start[b] / r;
  Tensor kv(DType::f32, {T, C2}), sc(DType::f32, {T, C2}), cu(DType::i32, {B + 1}), sp(DType::i32, {B});
  Tensor tab(DType::i32, {B, kBlocks});
  std::int64_t t = 0;
  for (std::int64_t b = 0; b < B; ++b) {
    cu.data<std::int32_t>()[b] = static_cast<std::int32_t>(t);
    sp.data<std::int32_t>()[b] = static_cast<std::int32_t>(start[b]);
    for (std::int64_t k = 0; k < kBlocks; ++k) tab.data<std::int32_t>()[b * kBlocks + k] = static_cast<std::int32_t>(1 + rs[b]->id * kBlocks + k);
    for (std::int64_t i = 0; i < len[b]; ++i, ++t) {
      std::memcpy(kv.data<float>() + t * C2, rs[b]->kv.data() + (start[b] + i) * kC2, static_cast<std::size_t>(C2) * 4);
      std::memcpy(sc.data<float>() + t * C2, rs[b]->sc.data() + (start[b] + i) * kC2, static_cast<std::size_t>(C2) * 4);
    }
  }
  cu.data<std::int32_t>()[B] = static_cast<std::int32_t>(t);
  const std::int64_t R = std::max<std::int64_t>(emitted, 1);
  Tensor rc(DType::f32, {R, 64}), rsn(DType::f32, {R, 64}), gamma(DType::bf16, {kD});
  std::int64_t row = 0;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t j = start[b] / r; j < (start[b] + len[b]) / r; ++j, ++row)
      num::v4_rope_row(64, j * r, rc.data<float>() + row * 64, rsn.data<float>() + row * 64);
  for (std::int64_t i = 0; i < kD; ++i) gamma.data<std::uint16_t>()[i] = num::f64_to_bf16(1.0 + 0.01 * static_cast<double>(i % 7));
  c.inputs = {{"kv_proj", kv}, {"norm_weight", gamma}, {"rope_sin", rsn},
              {"rope_cos", rc}, {"state_cache_in", state_in}, {"state_block_table", tab}, {"cu_seqlens", cu}, {"start_pos", sp}};
  if (!cf.v41) c.inputs["ape"] = shared_ape();
  if (r != 1) c.inputs["score_proj"] = sc;
  c.attrs["cache_mode"] = std::int64_t{cache_mode};
  if (cf.v41) {
    c.attrs["model"] = std::string("v41");
    c.attrs["cmp_ratio"] = r;
    c.attrs["coff"] = cf.coff;
  }
  if (!cf.variant.empty()) c.attrs["variant"] = cf.variant;
  if (cf.ring && cache_mode == 2) c.attrs["ring_rows"] = cf.ring;
  return c;
}

Tensor fresh_state(std::int64_t requests, std::int64_t C2 = kC2) {
  Tensor s(DType::f32, {1 + requests * kBlocks, kBs, 2 * C2});
  std::fill_n(s.data<float>(), s.numel(), std::numeric_limits<float>::quiet_NaN());
  return s;
}

// Runs request `q` (id 0) through the given step lengths; returns the cmp_kv rows of all steps, concatenated bits.
std::vector<std::uint16_t> run_chunks(const Req& q, const std::vector<std::int64_t>& lens, int cache_mode = 1, const Cfg& cf = {}) {
  Tensor state = fresh_state(1, cf.C2());
  std::vector<std::uint16_t> rows;
  std::int64_t p = 0;
  for (auto n : lens) {
    Case c = step({&q}, {p}, {n}, state, cache_mode, cf);
    const Expected e = test::run_reference(c);
    const Tensor& k = e.find("cmp_kv")->value;
    const std::int64_t emitted = (p + n) / cf.r - p / cf.r;
    rows.insert(rows.end(), k.data<std::uint16_t>(), k.data<std::uint16_t>() + emitted * kD);
    state = e.find("state_cache")->value;
    p += n;
  }
  return rows;
}

}  // namespace

TEST_CASE("v4.compressor: one prefill == chunks split at every position mod r == token-by-token decode") {
  const Req q = make_req(0, 24);
  const auto whole = run_chunks(q, {24});
  REQUIRE(whole.size() == 6 * kD);
  for (std::int64_t k = 1; k < 8; ++k) CHECK_MESSAGE(run_chunks(q, {k, 24 - k}) == whole, "split at " << k);
  CHECK(run_chunks(q, {3, 5, 2, 7, 7}) == whole);
  CHECK(run_chunks(q, std::vector<std::int64_t>(24, 1)) == whole);
  CHECK(run_chunks(q, {5, 19}, 2) == whole);  // cycle ring (8-token ring) == continuous
  CHECK(run_chunks(q, std::vector<std::int64_t>(24, 1), 2) == whole);
}

TEST_CASE("v4.compressor, model v41: ratios 1 and 2, every numerics: prefill == chunks == token-by-token decode, ring == continuous") {
  const Req q = make_req(0, 24);
  for (const char* variant : {"ascend-a3", "ref", "vllm-cuda"})
    for (std::int64_t r : {1, 2}) {
      Cfg cf;
      cf.r = r, cf.coff = 1, cf.v41 = true, cf.variant = variant, cf.ring = 16;
      CAPTURE(variant);
      CAPTURE(r);
      const auto whole = run_chunks(q, {24}, 1, cf);
      REQUIRE(whole.size() == static_cast<std::size_t>(24 / r * kD));
      for (std::int64_t k = 1; k < 4; ++k) CHECK_MESSAGE(run_chunks(q, {k, 24 - k}, 1, cf) == whole, "split at " << k);
      CHECK(run_chunks(q, {3, 5, 2, 7, 7}, 1, cf) == whole);
      CHECK(run_chunks(q, std::vector<std::int64_t>(24, 1), 1, cf) == whole);
      CHECK(run_chunks(q, {5, 19}, 2, cf) == whole);  // a 16-row ring (ring_rows) == continuous
      CHECK(run_chunks(q, std::vector<std::int64_t>(24, 1), 2, cf) == whole);
    }
}

TEST_CASE("v4.compressor, model v41: the NVFP4 entry is e2m1 times one e4m3 scale per 16 dims, not the bf16 entry") {
  const Req q = make_req(0, 16);
  Cfg cf;
  cf.r = 2, cf.coff = 1, cf.v41 = true;
  cf.variant = "ref";
  const Expected ref = test::run_reference(step({&q}, {0}, {16}, fresh_state(1, cf.C2()), 1, cf));
  cf.variant = "ascend-a3";
  const Expected a3 = test::run_reference(step({&q}, {0}, {16}, fresh_state(1, cf.C2()), 1, cf));
  const Tensor &k = ref.find("cmp_kv")->value, &b = a3.find("cmp_kv")->value;
  std::int64_t same = 0;
  for (std::int64_t row = 0; row < 8; ++row)
    for (std::int64_t blk = 0; blk < kD / 16; ++blk) {
      // every value of a block is (+-) an e2m1 magnitude times one power-of-two-mantissa e4m3 scale: v / vmax * 6 in
      // the e2m1 grid when the block's largest magnitude quantizes to 6 (amax / s in (5, 6] rounds to 6)
      double vmax = 0;
      for (std::int64_t d = 0; d < 16; ++d) vmax = std::max(vmax, std::fabs(k.value(row * kD + blk * 16 + d)));
      REQUIRE(vmax > 0);
      for (std::int64_t d = 0; d < 16; ++d) {
        const double t = std::fabs(k.value(row * kD + blk * 16 + d)) / vmax * 6.0;
        bool on_grid = false;
        for (double g : {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0}) on_grid = on_grid || t == g;
        CHECK_MESSAGE(on_grid, "row " << row << " dim " << blk * 16 + d << ": " << t);
        same += k.bits(row * kD + blk * 16 + d) == b.bits(row * kD + blk * 16 + d);
      }
    }
  CHECK(same < 8 * kD / 2);  // the quantized entry is not the bf16 one
}

TEST_CASE("v4.compressor, model v41: a gate at ratio 1, ring_rows without the ring, overlap and a too small ring are input errors") {
  const Req q = make_req(0, 8);
  Cfg cf;
  cf.r = 1, cf.coff = 1, cf.v41 = true;
  Case c = step({&q}, {0}, {4}, fresh_state(1, cf.C2()), 1, cf);
  Tensor sc(DType::f32, {4, cf.C2()});
  c.inputs["score_proj"] = sc;
  apply_attr_defaults(c);
  auto p = validate_case(c);
  REQUIRE(!p.empty());
  CHECK(p[0].str().find("inputs/score_proj") != std::string::npos);
  Case d = step({&q}, {0}, {4}, fresh_state(1, cf.C2()), 1, cf);
  d.attrs["ring_rows"] = std::int64_t{32};
  apply_attr_defaults(d);
  p = validate_case(d);
  REQUIRE(!p.empty());
  CHECK(p[0].str().find("attr ring_rows") != std::string::npos);
  cf.r = 2;
  Case e = step({&q}, {0}, {4}, fresh_state(1, cf.C2()), 2, cf);
  e.attrs["ring_rows"] = std::int64_t{1};
  apply_attr_defaults(e);
  p = validate_case(e);
  REQUIRE(!p.empty());
  CHECK(p[0].str().find("attr ring_rows") != std::string::npos);
  Case f = step({&q}, {0}, {4}, fresh_state(1, cf.C2()), 1, cf);
  f.attrs["coff"] = std::int64_t{2};
  apply_attr_defaults(f);
  p = validate_case(f);
  REQUIRE(!p.empty());
  CHECK(p[0].str().find("attr coff") != std::string::npos);
}

TEST_CASE("v4.compressor: a request's rows do not depend on the other requests of the batch") {
  const Req a = make_req(0, 13), b = make_req(1, 9);
  Tensor st = fresh_state(2);
  const Expected alone = test::run_reference(step({&a}, {0}, {13}, st));
  const Expected both = test::run_reference(step({&b, &a}, {0, 0}, {9, 13}, st));
  const Tensor &x = alone.find("cmp_kv")->value, &y = both.find("cmp_kv")->value;
  // a's 3 rows come after b's 2 rows
  CHECK(std::memcmp(x.data<std::uint16_t>(), y.data<std::uint16_t>() + 2 * kD, 3 * kD * 2) == 0);
}

TEST_CASE("v4.compressor: the projections' token blocks (their size follows T and the threads) do not change a bit") {
  // T = 471 tokens from x: blocks of 240 (1 thread), 120 (2), 80 (3), 64 (16) tokens, tails of 231 / 111 / 71 / 23
  // rows (the GEMM computes them rounded up to 4), and a one-token request.
  golden::GoldenSpec spec{.name = "blocks", .stage = "v4.compressor", .generator = "v4c.step", .seed = 77,
                          .dims = {{"D", 128}, {"H", 64}, {"bs", 8}}, .lists = {{"start_pos", {0, 3, 9}}, {"q_len", {300, 170, 1}}},
                          .attrs = {{"cmp_ratio", golden::I(4)}, {"coff", golden::I(2)}}};
  const Case c = golden::make_case(spec, 1, 0);
  REQUIRE(c.inputs.count("x"));
  const Expected one = test::run_reference(c, 1);
  for (int threads : {2, 3, 16}) {
    const auto d = pipeline::diff_expected(one, test::run_reference(c, threads), "1 thread", std::to_string(threads) + " threads");
    INFO(threads << " threads" << (d.empty() ? "" : ": " + d[0].tensor + ": " + d[0].message));
    CHECK(d.empty());
  }
}

TEST_CASE("v4.compressor: missing table entries and too few rope rows are input errors naming the tensor") {
  const Req q = make_req(0, 80);
  Case c = step({&q}, {0}, {80}, fresh_state(1));  // 80 positions need 10 blocks of 8, the table has 8
  apply_attr_defaults(c);
  auto p = validate_case(c);
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("inputs/state_block_table") != std::string::npos);
  Case d = step({&q}, {0}, {12}, fresh_state(1));
  d.inputs["rope_sin"] = Tensor(DType::f32, {2, 64});
  d.inputs["rope_cos"] = Tensor(DType::f32, {2, 64});
  apply_attr_defaults(d);
  p = validate_case(d);
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("inputs/rope_sin") != std::string::npos);
}

#include "numerics/hadamard.hpp"
#include "stages/v4/indexer_prolog/stage.hpp"

TEST_CASE("v4.indexer_prolog: the DSA_HD constants are the expressions' fp32 values") {
  namespace ip = v4::indexer_prolog;
  const volatile float one = 1.0f, d127 = 127.0f;
  const volatile double w = 0.011048543456039806;
  CHECK(num::f32_bits(dsa::quant::inv127_f32()) == num::f32_bits(one / d127));
  CHECK(num::f32_bits(ip::a3_weight_scale_f32()) == num::f32_bits(static_cast<float>(w)));
}

TEST_CASE("v4.indexer_prolog: amax/127 and amax*fl32(1/127) give the same fp16 scale for every bf16 amax (exhaustive)") {
  // The A3 kernel multiplies by fl32(1/127); a kernel dividing by 127 differs in fp32 for some amax, but the stored
  // fp16 scale never differs for a bf16 input: the mutant is unobservable in q_scale / k_scale_cache on A3.
  namespace ip = v4::indexer_prolog;
  int fp32_differ = 0, fp16_differ = 0;
  for (std::uint32_t b = 1; b < 0x7F80u; ++b) {
    const auto x = static_cast<std::uint16_t>(b);
    std::int8_t c1, c2;
    const float s1 = ip::dynamic_quant_int8(&x, 1, ip::AmaxZero::scale1, &c1);
    const float s2 = ip::dynamic_quant_int8(&x, 1, ip::AmaxZero::scale1, &c2, ip::Bug::scale_div127);
    CHECK(c1 == 127);
    CHECK(c1 == c2);
    fp32_differ += s1 != s2;
    fp16_differ += num::f32_to_fp16(s1) != num::f32_to_fp16(s2);
  }
  CHECK(fp32_differ > 1000);  // the fp32 scales do differ (1488 bf16 values)
  CHECK(fp16_differ == 0);
}

TEST_CASE("v4.indexer_prolog: dynamic_quant_int8 codes round half to even at fl32(x * 127/amax), amax = 0 options, NaN rows") {
  namespace ip = v4::indexer_prolog;
  // amax 2.0: inv = 63.5, x = 1.0 -> 63.5 -> 64 (even), x = -0.0234375 (3/128) -> -1.48828125 -> -1.
  const std::uint16_t row[3] = {num::f32_to_bf16(2.0f), num::f32_to_bf16(1.0f), num::f32_to_bf16(-0.0234375f)};
  std::int8_t c[3];
  const float s = ip::dynamic_quant_int8(row, 3, ip::AmaxZero::scale1, c);
  CHECK(s == 2.0f * (1.0f / 127.0f));
  CHECK(c[0] == 127);
  CHECK(c[1] == 64);
  CHECK(c[2] == -1);
  const std::uint16_t zero[2] = {0, 0x8000};
  CHECK(ip::dynamic_quant_int8(zero, 2, ip::AmaxZero::scale1, c) == 1.0f);
  CHECK(ip::dynamic_quant_int8(zero, 2, ip::AmaxZero::scale0, c) == 0.0f);
  CHECK((c[0] == 0 && c[1] == 0));
  const std::uint16_t nan[2] = {0x7FC0, num::f32_to_bf16(3.0f)};
  CHECK(std::isnan(ip::dynamic_quant_int8(nan, 2, ip::AmaxZero::scale1, c)));
  CHECK((c[0] == 0 && c[1] == 0));
}

TEST_CASE("v4.indexer_prolog: the q rotation's bound is 0 for certain values and covers a RoPE value on a bf16 tie") {
  namespace ip = v4::indexer_prolog;
  constexpr std::int64_t D = 128;
  float cv[32], sv[32];
  for (int i = 0; i < 32; ++i) cv[i] = 1.0f, sv[i] = 0.0f;
  sv[0] = std::ldexp(1.0f, -9);
  std::vector<std::uint16_t> x(D), out(D), alt(D);
  std::vector<double> bound(D);
  Rng r(3);
  for (auto& v : x) v = num::f64_to_bf16(r.normal());
  // Generic rows: almost every value certain (bound 0); the rest are rows whose smallest value is so small that the
  // cube's fp32 sum is not certified exact.
  std::int64_t uncertain = 0;
  for (int row = 0; row < 64; ++row) {
    for (auto& v : x) v = num::f64_to_bf16(r.normal());
    ip::rotate_row(x.data(), D, cv, sv, ip::HadamardKind::ascend, out.data(), bound.data());
    for (double b : bound) uncertain += b > 0;
  }
  MESSAGE("uncertain values in 64 N(0,1) rows: " << uncertain << " of " << 64 * D);
  CHECK(uncertain < 64 * D * 3 / 100);
  // Dims 64, 65 = 1, 1 with cos 1, sin 2^-9: RoPE value 1 - 2^-9 is the midpoint of the bf16 values 1 - 2^-8 and 1
  // (RNE: 1); a kernel whose fp32 error lands just below gets 1 - 2^-8. Every output depends on it.
  x[64] = num::f64_to_bf16(1.0), x[65] = num::f64_to_bf16(1.0);
  ip::rotate_row(x.data(), D, cv, sv, ip::HadamardKind::ascend, out.data(), bound.data());
  // That kernel, evaluated exactly: r[64] = 1 - 2^-8, the rest as the reference rounds them.
  std::vector<double> rr(D);
  for (std::int64_t d = 0; d < D; ++d) rr[static_cast<std::size_t>(d)] = num::bf16_to_f32(x[static_cast<std::size_t>(d)]);
  for (int i = 0; i < 32; ++i) {
    const double a = rr[static_cast<std::size_t>(64 + 2 * i)], b = rr[static_cast<std::size_t>(65 + 2 * i)];
    rr[static_cast<std::size_t>(64 + 2 * i)] = num::bf16_to_f32(num::f64_to_bf16(a * cv[i] - b * static_cast<double>(sv[i])));
    rr[static_cast<std::size_t>(65 + 2 * i)] = num::bf16_to_f32(num::f64_to_bf16(b * cv[i] + a * static_cast<double>(sv[i])));
  }
  CHECK(rr[64] == 1.0);  // RNE of the tie
  rr[64] = 1.0 - std::ldexp(1.0, -8);
  int moved = 0, covered = 0;
  for (std::int64_t i = 0; i < D; ++i) {
    double S = 0;
    for (std::int64_t d = 0; d < D; ++d) S += (__builtin_popcountll(static_cast<unsigned long long>(i & d)) & 1) ? -rr[static_cast<std::size_t>(d)] : rr[static_cast<std::size_t>(d)];
    const float h = num::bf16_to_f32(num::f64_to_bf16(S));
    const double o = num::bf16_to_f32(num::f32_to_bf16(h * num::hadamard_scale_f32(D)));
    const double ref = num::bf16_to_f32(out[static_cast<std::size_t>(i)]);
    moved += o != ref;
    covered += std::fabs(o - ref) <= bound[static_cast<std::size_t>(i)];
  }
  CHECK(covered == D);
  CHECK(moved > 0);  // the alternative rounding does show in some outputs: the bound is needed
}

#include "pipeline/golden.hpp"
#include "stages/v4/indexer/stage.hpp"

TEST_CASE("v4.indexer: the one scorer (the CUDA kernel body, which the CPU runs) gives the same bytes on 1 thread, on all threads and on the GPU when present, every variant") {
  // Every golden and selftest case, plus shapes the kernels must not assume away: D not a multiple of 4 (no dp4a
  // words), odd H and block size, rows with nothing visible, NaN / inf planted in each variant's float operands.
  const char* st = "v4.indexer";
  const char* g = "v4i.requests";
  std::vector<golden::GoldenSpec> specs = {
      {.name = "a3_odd", .stage = st, .generator = g, .seed = 7, .dims = {{"H", 6}, {"D", 30}, {"bs", 7}},
       .lists = {{"q_len", {5, 2}}, {"kv_len", {60, 3}}}, .params = {{"dup_keys", 1}}, .attrs = {{"sparse_count", golden::I(5)}},
       .poison = {{"weights", 1, 2, golden::kNaN}, {"key_dequant_scale", 1, 3, golden::kInf}, {"query_dequant_scale", 3, 0, -golden::kInf}}},
      {.name = "vllm_odd", .stage = st, .generator = g, .seed = 8, .dims = {{"H", 5}, {"D", 30}, {"bs", 7}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {61, 9}}}, .params = {{"vllm", 1}, {"dup_keys", 1}},
       .attrs = {{"sparse_count", golden::I(6)}, {"sorted", golden::I(0)}},
       .poison = {{"weights", 0, 1, golden::kNaN}, {"key_dequant_scale", 2, 1, golden::kInf}, {"query", 3, 4, golden::kNaN}}},
      {.name = "ref_odd", .stage = st, .generator = g, .seed = 9, .dims = {{"H", 7}, {"D", 33}, {"bs", 5}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {50, 13}}}, .params = {{"ref", 1}, {"dup_keys", 1}},
       .attrs = {{"sparse_count", golden::I(4)}},
       .poison = {{"weights", 2, 0, golden::kNaN}, {"key", 1, 5, -golden::kInf}}},
  };
  test::check_thread_and_gpu_agreement<v4::indexer::Params>(st, std::move(specs), [](const Case& c, const v4::indexer::Params& p, const RefOptions&) {
    return v4::indexer::run(c, p, v4::indexer::Bug::none, 1);
  });
}
