// numerics.*: ue8m0 / fp32 scales (spec v32 §2.5, §3.4, §3.6) against the alternative formulas, computed here
// independently; act_quant blocks checked by hand; dtype names. Conversions are checked exhaustively against
// ml_dtypes in tests/python/test_numerics_exhaustive.py.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ios>
#include <limits>
#include <random>
#include <vector>

#include "numerics/dequant_vec.hpp"
#include "numerics/dtype.hpp"
#include "numerics/exact_digits.hpp"
#include "numerics/formats.hpp"
#include "engines/quant/block_quant.hpp"

using namespace dsa;
using namespace dsa::num;
using i64 = std::int64_t;

namespace {

// ceil(log2(t)) for a positive finite float, in double (exact for every float: log2 of a float that is not a
// power of two is at least ~1.7e-7 away from an integer, far above double's error).
int ceil_log2(float t) { return static_cast<int>(std::ceil(std::log2(static_cast<double>(t)))); }

// Exponent of a power-of-two float scale.
int pow2_exp(float s) {
  int e;
  const double m = std::frexp(static_cast<double>(s), &e);
  REQUIRE(m == 0.5);  // a power of two
  return e - 1;
}

// TileKernels' bit formula: e = ((bits(fl32(amax/448)) - 1) >> 23) + 1 - 127 (normal, positive t).
int tilekernels_exp(float amax) {
  const float t = amax / 448.0f;
  return static_cast<int>((f32_bits(t) - 1u) >> 23) + 1 - 127;
}

}  // namespace

TEST_CASE("numerics.f32_to_e4m3 bit path equals the exact f64 encoder on every rounding class and 2^22 random inputs") {
  // Every rounding position of e4m3 from fp32 (normal: 20 dropped bits; subnormal: >= 21) has its guard bit among
  // mantissa bits 16..22, enumerated in full; the sticky bits below take each of the patterns that matter.
  std::int64_t n = 0, bad = 0;
  auto one = [&](std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    const std::uint8_t fast = num::f32_to_e4m3(x), exact = num::f64_to_e4m3(static_cast<double>(x));
    ++n;
    if (fast != exact && bad++ < 5) FAIL_CHECK("f32 0x" << std::hex << u << ": fast 0x" << int(fast) << " exact 0x" << int(exact));
  };
  for (std::uint32_t sign = 0; sign < 2; ++sign)
    for (std::uint32_t e = 0; e < 256; ++e)
      for (std::uint32_t hi = 0; hi < 128; ++hi)
        for (std::uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) one(sign << 31 | e << 23 | hi << 16 | lo);
  std::uint64_t z = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < (1 << 22); ++i) {
    z ^= z << 13;
    z ^= z >> 7;
    z ^= z << 17;
    one(static_cast<std::uint32_t>(z));
  }
  CHECK(n > (1 << 22));
  CHECK(bad == 0);
}

TEST_CASE("numerics.ue8m0 exhaustive over bf16 amax >= 1e-4 vs ceil(log2) and TileKernels formulas") {
  const float eps = 1e-4f;
  REQUIRE(f32_bits(eps) == 0x38D1B717u);
  REQUIRE(f32_bits(inv448_f32()) == 0x3B124925u);
  REQUIRE(static_cast<double>(inv448_f32()) == static_cast<double>(1.0f / 448.0f));  // fl32(1/448)
  int checked = 0;
  for (std::uint32_t b = 0; b < 0x7F80u; ++b) {  // positive finite bf16
    const float amax = bf16_to_f32(static_cast<std::uint16_t>(b));
    if (amax < eps) continue;
    const float s = ue8m0_scale(amax, eps);
    const int e = pow2_exp(s);
    // spec §2.5 "bit trick on fl32(amax * fl32(1/448))"
    const int e_mul = ceil_log2(amax * inv448_f32());
    // DeepGEMM ceil_to_ue8m0 / vLLM: ceil(log2(fl32(amax / 448)))
    const int e_div = ceil_log2(amax / 448.0f);
    if (e != e_mul || e != e_div || e != tilekernels_exp(amax)) {
      FAIL("amax bf16 0x" << std::hex << b << std::dec << " = " << amax << ": ue8m0 e=" << e << " mul " << e_mul
                          << " div " << e_div << " tilekernels " << tilekernels_exp(amax));
    }
    // The scale covers the block: amax / s <= 448 (so the clamp of §2.5 is a no-op) and > 224 unless clamped.
    CHECK(static_cast<double>(amax) / static_cast<double>(s) <= 448.0);
    ++checked;
  }
  CHECK(checked > 16000);
}

TEST_CASE("numerics.ue8m0 clamped - eps 1e-10 - subnormal - zero - NaN and inf amax") {
  // amax below eps is clamped: 1e-4 / 448 = 2.23e-7 lies in (2^-23, 2^-22]: e = -22 (spec §2.5).
  for (float amax : {0.0f, -0.0f, 1e-30f, 5e-5f, 1e-4f}) CHECK(ue8m0_scale(amax) == std::ldexp(1.0f, -22));
  CHECK(ue8m0_scale(bf16_to_f32(0x38D2)) == std::ldexp(1.0f, -22));  // smallest bf16 above 1e-4
  // vLLM fused path eps = 1e-10: 1e-10 / 448 = 2.23e-13 in (2^-43, 2^-42]: e = -42.
  CHECK(ue8m0_scale(0.0f, 1e-10f) == std::ldexp(1.0f, -42));
  CHECK(pow2_exp(ue8m0_scale(0.0f, 1e-10f)) == ceil_log2(1e-10f * inv448_f32()));
  CHECK(ue8m0_scale(1e-6f, 1e-10f) == std::ldexp(1.0f, ceil_log2(1e-6f * inv448_f32())));
  // Subnormal t (eps tiny): still 2^ceil(log2 t), itself subnormal.
  const float tiny = 1e-40f;
  const float t = tiny * inv448_f32();
  REQUIRE(std::fpclassify(t) == FP_SUBNORMAL);
  CHECK(ue8m0_scale(0.0f, tiny) == std::ldexp(1.0f, ceil_log2(t)));
  CHECK(ue8m0_scale(std::ldexp(1.0f, -140) * 448.0f * 0.75f, 1e-45f) > 0.0f);
  // t underflows to 0: 2^ceil(log2 0) = 2^-inf = 0 (vLLM exp2f(ceilf(log2f(0)))).
  CHECK(ue8m0_scale(0.0f, std::numeric_limits<float>::denorm_min()) == 0.0f);
  // Exact powers of two times 448: t is (nearly) a power of two; the scale must still cover amax.
  for (int k = -20; k <= 100; ++k) {
    const float amax = std::ldexp(448.0f, k);
    CHECK(static_cast<double>(amax) / static_cast<double>(ue8m0_scale(amax)) <= 448.0);
    CHECK(pow2_exp(ue8m0_scale(amax)) == ceil_log2(amax / 448.0f));
  }
  CHECK(std::isnan(ue8m0_scale(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isinf(ue8m0_scale(std::numeric_limits<float>::infinity())));
  CHECK(ue8m0_scale(std::numeric_limits<float>::max()) == std::ldexp(1.0f, 120));  // 3.4e38/448 -> 2^120
}

TEST_CASE("numerics.fp32 scales - div rounds amax/448 once - mul is fl32(amax * fl32(1/448))") {
  int differ = 0;
  for (std::uint32_t b = 0; b < 0x7F80u; ++b) {
    const float amax = bf16_to_f32(static_cast<std::uint16_t>(b));
    const float m = std::fmax(amax, 1e-4f);
    const float sd = fp32_scale_div(amax), sm = fp32_scale_mul(amax);
    // mul: the product of two floats is exact in double; one rounding to float.
    CHECK(sm == static_cast<float>(static_cast<double>(m) * static_cast<double>(inv448_f32())));
    // div: the float nearest to m/448 (m/448 is never a float tie: 448 = 7 * 2^6 and m has 8 significant bits).
    const double exact = static_cast<double>(m) / 448.0;
    const double err = std::fabs(static_cast<double>(sd) - exact);
    CHECK(err <= std::fabs(static_cast<double>(std::nextafter(sd, 0.0f)) - exact));
    CHECK(err <= std::fabs(static_cast<double>(std::nextafter(sd, 1e30f)) - exact));
    if (sd != sm) ++differ;
  }
  // The two conventions are genuinely different (so the scale_fmt attr matters); measured: a sizeable fraction.
  CHECK(differ > 100);
  CHECK(fp32_scale_div(0.0f) == 1e-4f / 448.0f);
  CHECK(fp32_scale_mul(0.0f, 1e-10f) == 1e-10f * inv448_f32());
  CHECK(std::isnan(fp32_scale_div(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(fp32_scale_mul(std::numeric_limits<float>::quiet_NaN())));
}

// Every form of quant::ScaleRule against a scale computed here in double (IEEE division and the fp32 product are
// innocuous under double rounding: 53 >= 2*24 + 2), over every positive bf16 amax plus 2^16 random floats including
// subnormals, each floor placement, and the legacy named formulas of fp8_core.hpp where they exist.
TEST_CASE("numerics.ScaleRule - every round x op x eps placement equals a double-precision model") {
  using namespace dsa::quant;
  auto bf16_rne = [](double t) {  // RNE to 8 significant bits (quantum 2^-133 below 2^-126), by rint (ties to even)
    if (t == 0.0) return 0.0f;
    int e;
    std::frexp(t, &e);
    const int q = std::max(e - 8, -133);
    return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(t, -q)), q));
  };
  auto pow2c = [](double t) {  // 2^ceil(log2 t), t > 0
    int e;
    const double m = std::frexp(t, &e);
    return static_cast<float>(m == 0.5 ? t : std::ldexp(1.0, e));
  };
  auto model = [&](const ScaleRule& r, float amax) -> float {
    const double a = r.eps_on == EpsOn::amax ? std::fmax(static_cast<double>(amax), static_cast<double>(r.eps)) : amax;
    const float inv = static_cast<float>(1.0 / 448.0);
    float t = r.op == ScaleOp::div ? static_cast<float>(a / 448.0) : static_cast<float>(a * static_cast<double>(inv));
    if (r.eps_on == EpsOn::scale) t = std::fmax(t, r.eps);
    if (r.round == ScaleRound::bf16) return bf16_rne(t);
    if (r.round == ScaleRound::pow2) return t == 0.0f ? 0.0f : pow2c(t);
    return t;
  };
  std::vector<float> amaxes;
  for (std::uint32_t b = 0; b < 0x7F80u; ++b) amaxes.push_back(bf16_to_f32(static_cast<std::uint16_t>(b)));
  std::mt19937 rng(7);
  for (int i = 0; i < 65536; ++i) {
    std::uint32_t bits = rng() & 0x7FFFFFFFu;
    if ((bits >> 23) == 0xFF) bits &= 0x7F7FFFFFu;
    float f;
    std::memcpy(&f, &bits, 4);
    amaxes.push_back(f);
  }
  long checked = 0;
  for (auto round : {ScaleRound::fp32, ScaleRound::bf16, ScaleRound::pow2})
    for (auto op : {ScaleOp::div, ScaleOp::mul})
      for (auto on : {EpsOn::amax, EpsOn::scale})
        for (float eps : {0.0f, 1e-4f, std::numeric_limits<float>::min()}) {
          const ScaleRule r{round, op, on, eps};
          for (float a : amaxes) {
            const float got = scale_of(r, a), want = model(r, a);
            if (f32_bits(got) != f32_bits(want)) {
              FAIL_CHECK("rule " << int(round) << int(op) << int(on) << " eps " << eps << " amax " << a << ": "
                                 << got << " != " << want);
              break;
            }
            ++checked;
          }
        }
  CHECK(checked == 3L * 2 * 2 * 3 * static_cast<long>(amaxes.size()));
  // The legacy named formulas (fp8_core.hpp) are particular rules.
  for (float a : amaxes) {
    CHECK(scale_of(ue8m0_rule(), a) == fp8core::scale_of(fp8core::Fmt::ue8m0, a, 1e-4f));
    CHECK(scale_of(fp32_div_rule(), a) == fp8core::scale_of(fp8core::Fmt::fp32_div, a, 1e-4f));
    CHECK(scale_of(fp32_mul_rule(), a) == fp8core::scale_of(fp8core::Fmt::fp32_mul, a, 1e-4f));
    CHECK(scale_of(pow2_rule(), a) == fp8core::scale_of(fp8core::Fmt::pow2_div, a, 1e-4f));
    CHECK(scale_of(ScaleRule{ScaleRound::fp32, ScaleOp::div, EpsOn::scale, 1e-4f}, a) ==
          fp8core::scale_of(fp8core::Fmt::fp32_floor, a, 1e-4f));
  }
  // div and mul differ on real amaxes (a torch-on-CUDA writer is not a CUDA-C writer), and bf16 rounding matters.
  int div_mul = 0, bf = 0;
  for (float a : amaxes) {
    div_mul += scale_of(fp32_div_rule(), a) != scale_of(fp32_mul_rule(), a);
    bf += scale_of(fp32_div_rule(), a) != scale_of(ScaleRule{ScaleRound::bf16, ScaleOp::div, EpsOn::amax, 1e-4f}, a);
  }
  CHECK(div_mul > 100);
  CHECK(bf > 1000);
  CHECK(std::isnan(scale_of(fp32_mul_rule(), std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(scale_of(ScaleRule{ScaleRound::bf16, ScaleOp::div, EpsOn::scale, 1e-4f},
                            std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("numerics.act_quant hand-checked blocks") {
  using dsa::quant::QuantParams;
  std::vector<std::uint8_t> y(128);
  SUBCASE("zero block: scale 2^-22 (eps clamp), codes +0; negative zeros keep their sign") {
    std::vector<float> x(128, 0.0f);
    for (int i = 64; i < 128; ++i) x[static_cast<std::size_t>(i)] = -0.0f;
    CHECK(dsa::quant::quantize_block(x.data(), 128, dsa::quant::QuantParams{}, y.data()) == std::ldexp(1.0f, -22));
    for (int i = 0; i < 128; ++i) CHECK(y[static_cast<std::size_t>(i)] == (i < 64 ? 0x00 : 0x80));
  }
  SUBCASE("all-equal block: 1.0 -> s = 2^-8 (1/448 in (2^-9, 2^-8]), x/s = 256 = e4m3 0x78") {
    std::vector<float> x(128, 1.0f);
    CHECK(dsa::quant::quantize_block(x.data(), 128, dsa::quant::QuantParams{}, y.data()) == std::ldexp(1.0f, -8));
    for (auto c : y) CHECK(c == 0x78);
    std::vector<float> xn(128, -3.0f);  // 3/448 in (2^-8, 2^-7]: s = 2^-7, x/s = -384 = -1.5*2^8 -> 0xFC
    CHECK(dsa::quant::quantize_block(xn.data(), 128, dsa::quant::QuantParams{}, y.data()) == std::ldexp(1.0f, -7));
    for (auto c : y) CHECK(c == 0xFC);
  }
  SUBCASE("subnormal codes: amax 1 (s = 2^-8), x = k*2^-17 -> k*2^-9, ties to even") {
    std::vector<float> x(128, 0.0f);
    x[0] = 1.0f;
    x[1] = std::ldexp(1.0f, -17);      // 2^-9: smallest subnormal 0x01
    x[2] = std::ldexp(3.0f, -18);      // 1.5 * 2^-9: tie -> 2 * 2^-9 = 0x02
    x[3] = std::ldexp(1.0f, -18);      // 0.5 * 2^-9: tie -> 0
    x[4] = -std::ldexp(1.0f, -17);     // 0x81
    x[5] = std::ldexp(7.0f, -17);      // largest subnormal 0x07
    x[6] = std::ldexp(1.0f, -14);      // 2^-6: smallest normal 0x08
    x[7] = std::ldexp(5.0f, -18);      // 2.5 * 2^-9: tie -> 2 (even) = 0x02
    x[8] = std::ldexp(3.0f, -19);      // 0.75 * 2^-9 -> 0x01
    CHECK(dsa::quant::quantize_block(x.data(), 128, dsa::quant::QuantParams{}, y.data()) == std::ldexp(1.0f, -8));
    const std::uint8_t want[] = {0x78, 0x01, 0x02, 0x00, 0x81, 0x07, 0x08, 0x02, 0x01};
    for (std::size_t i = 0; i < sizeof(want); ++i) CHECK(y[i] == want[i]);
  }
  SUBCASE("saturation: the block maximum maps to +-448 (0x7E/0xFE), never NaN, for every scale format") {
    using dsa::quant::ScaleRule;
    for (ScaleRule rule : {dsa::quant::ue8m0_rule(), dsa::quant::fp32_div_rule(), dsa::quant::fp32_mul_rule(),
                           ScaleRule{dsa::quant::ScaleRound::bf16, dsa::quant::ScaleOp::div, dsa::quant::EpsOn::amax,
                                     1e-4f}}) {
      for (auto apply : {dsa::quant::ScaleApply::div, dsa::quant::ScaleApply::mul_inv}) {
        dsa::quant::QuantParams p;
        p.scale = rule;
        p.apply = apply;
        for (std::uint32_t b = 0x3F80; b < 0x4780; b += 7) {  // amax from 1 to 65536
          const float a = bf16_to_f32(static_cast<std::uint16_t>(b));
          std::vector<float> x(128, 0.0f);
          x[0] = a;
          x[1] = -a;
          dsa::quant::quantize_block(x.data(), 128, p, y.data());
          if (rule.round != dsa::quant::ScaleRound::fp32) {
            CHECK(y[0] <= 0x7E);  // pow2: a/s in (224, 448]; bf16: s may round below a/448 -> clamped to 448
          } else {
            CHECK(y[0] == 0x7E);  // a/s ~ 448 (rounding either side of 448 gives 448)
            CHECK(y[1] == 0xFE);
          }
          CHECK(y[0] != 0x7F);
        }
      }
    }
    // Without the clamp, an unclamped fp32_mul scale that lands below amax/448 still rounds to 448 (<= 464).
    dsa::quant::QuantParams p;
    p.scale = dsa::quant::fp32_mul_rule();
    p.clamp = false;
    std::vector<float> x(128, 0.0f);
    x[0] = 1000.0f;
    dsa::quant::quantize_block(x.data(), 128, p, y.data());
    CHECK(y[0] == 0x7E);
  }
  SUBCASE("NaN in a block: NaN scale, every code NaN") {
    std::vector<float> x(128, 1.0f);
    x[5] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(dsa::quant::quantize_block(x.data(), 128, dsa::quant::QuantParams{}, y.data())));
    for (auto c : y) CHECK((c & 0x7F) == 0x7F);
  }
}

TEST_CASE("numerics.dtype names - aliases and sizes") {
  for (DType t : kAllDTypes) {
    auto p = parse_dtype(dtype_name(t));
    REQUIRE(p.has_value());
    CHECK(*p == t);
  }
  CHECK(parse_dtype("bfloat16") == DType::bf16);
  CHECK(parse_dtype("float8_e4m3fn") == DType::fp8_e4m3fn);
  CHECK(parse_dtype("F8_E4M3") == DType::fp8_e4m3fn);
  CHECK(parse_dtype("float16") == DType::fp16);
  CHECK(parse_dtype("float32") == DType::f32);
  CHECK_FALSE(parse_dtype("bfloat17").has_value());
  CHECK_FALSE(parse_dtype("").has_value());
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::fp8_e5m2) == 1);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_stored_as_bits(DType::fp16));
  CHECK_FALSE(dtype_stored_as_bits(DType::int8));
  CHECK(dtype_is_integer(DType::u16));
  CHECK(dtype_is_float(DType::fp8_e4m3fn));
}

TEST_CASE("numerics.decode_bits / encode_bits agree with the typed conversions") {
  CHECK(decode_bits(DType::bf16, 0x3F80) == 1.0);
  CHECK(decode_bits(DType::fp16, 0x3C00) == 1.0);
  CHECK(decode_bits(DType::fp8_e4m3fn, 0x7E) == 448.0);
  CHECK(decode_bits(DType::fp8_e5m2, 0x7B) == 57344.0);
  CHECK(std::isinf(decode_bits(DType::fp8_e5m2, 0x7C)));
  CHECK(decode_bits(DType::int8, 0xFF) == -1.0);
  CHECK(decode_bits(DType::i32, 0xFFFFFFFFu) == -1.0);
  CHECK(decode_bits(DType::u16, 0xFFFF) == 65535.0);
  CHECK(encode_bits(DType::fp8_e4m3fn, 464.0) == 0x7E);
  CHECK(encode_bits(DType::fp8_e4m3fn, -465.0) == 0xFF);
  CHECK(encode_bits(DType::bf16, 1.0 + std::ldexp(1.0, -8)) == 0x3F80);  // tie to even
  CHECK(encode_bits(DType::f32, 0.1) == f32_bits(0.1f));
  for (unsigned c = 0; c < 256; ++c) {
    const double v = e4m3_to_f64(static_cast<std::uint8_t>(c));
    if (!std::isnan(v)) CHECK(f64_to_e4m3(v) == c);
  }
}

// ---- numerics/exact_digits.hpp: the exact int8 digit dots of the CUDA logits engine (gpu_exact_dot.md) ----
TEST_CASE("numerics.exact_digits of every e4m3 code, all 256 x 256 digit products, and random D=128 folds") {
  for (int c = 0; c < 256; ++c) {
    const auto code = static_cast<std::uint8_t>(c);
    const std::int32_t x = exactdot::scaled_int(code);
    const bool nan = (c & 0x7F) == 0x7F;
    CHECK(exactdot::is_nan_code(code) == nan);
    if (nan) {
      CHECK(x == 0);
      continue;
    }
    CHECK(static_cast<double>(x) == e4m3_to_f64(code) * 512.0);
    const exactdot::Digits d = exactdot::digits(x);
    CHECK(d.d[0] >= -32);
    CHECK(d.d[0] <= 31);
    CHECK(d.d[1] >= -32);
    CHECK(d.d[1] <= 31);
    CHECK(std::abs(static_cast<int>(d.d[2])) <= 56);
    CHECK(d.d[2] * 4096 + d.d[1] * 64 + d.d[0] == x);
    const std::uint32_t pk = exactdot::packed_digits(code);
    CHECK(static_cast<std::int8_t>(pk & 0xFF) == d.d[0]);
    CHECK(static_cast<std::int8_t>((pk >> 16) & 0xFF) == d.d[2]);
  }
  i64 bad = 0;
  for (int a = 0; a < 256; ++a)
    for (int b = 0; b < 256; ++b) {
      const exactdot::Digits x = exactdot::digits(exactdot::scaled_int(static_cast<std::uint8_t>(a)));
      const exactdot::Digits y = exactdot::digits(exactdot::scaled_int(static_cast<std::uint8_t>(b)));
      std::int64_t s = 0;
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) s += (std::int64_t{x.d[i]} * y.d[j]) << (6 * (i + j));
      bad += s != std::int64_t{exactdot::scaled_int(static_cast<std::uint8_t>(a))} * exactdot::scaled_int(static_cast<std::uint8_t>(b));
    }
  CHECK(bad == 0);
  // D = 128 vectors (random, and all +-448 / the digit extremes): per shift group the int32 sums of the engine stay
  // below 2^31 and their fp64 fold (2^(6g) * sum, g = 0..4) equals the exact dot in units of 2^-18.
  std::mt19937_64 g(42);
  std::int64_t worst = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::uint8_t qa[128], kb[128];
    for (int d = 0; d < 128; ++d) {
      auto pick = [&]() -> std::uint8_t {
        if (trial < 4) return trial % 2 ? 0x7E : (d % 2 ? 0xFE : 0x7E);  // +-448
        if (trial < 8) return static_cast<std::uint8_t>(0x5F + (trial % 2) * 0x80);  // x1 and x0 extremes
        std::uint8_t c;
        do c = static_cast<std::uint8_t>(g()); while ((c & 0x7F) == 0x7F);
        return c;
      };
      qa[d] = pick();
      kb[d] = pick();
    }
    std::int64_t grp[5] = {}, exact = 0;
    for (int d = 0; d < 128; ++d) {
      const exactdot::Digits x = exactdot::digits(exactdot::scaled_int(qa[d])), y = exactdot::digits(exactdot::scaled_int(kb[d]));
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) grp[i + j] += std::int64_t{x.d[i]} * y.d[j];
      exact += std::int64_t{exactdot::scaled_int(qa[d])} * exactdot::scaled_int(kb[d]);
    }
    double fold = 0;
    for (int s = 0; s < 5; ++s) {
      worst = std::max(worst, std::abs(grp[s]));
      fold += static_cast<double>(static_cast<std::int32_t>(grp[s])) * static_cast<double>(std::int64_t{1} << (6 * s));
    }
    CHECK(fold == static_cast<double>(exact));
    CHECK(static_cast<std::int64_t>(fold) == exact);
  }
  CHECK(worst < (std::int64_t{1} << 31));
}

// The six-unit Toom-3 recombination: every unit sum and every int32 intermediate stays inside int32 and the value is
// the exact dot, for the derivation of logits_wgmma.hpp (high = (65 P1 - 63 Pm1) / 2 + 4095 c4, low = 64 c1 + c0,
// 4096 high - 4095 low) and for the sm_90a engine's steps (R = P1, T = Pm1, R *= 65, R -= 63 T; T = c4, T *= -64,
// T += c1, T *= 64, T += c0; wg_value), on random vectors, all-extreme vectors (+-448 with equal and alternating
// signs, digit extremes) and every code pair.
TEST_CASE("numerics.toom3 recombination of the wgmma logits engine is exact and never leaves int32") {
  auto unit_sums = [](const std::uint8_t* q, const std::uint8_t* k, int D, std::int64_t u[5]) {
    for (int i = 0; i < 5; ++i) u[i] = 0;
    std::int64_t exact = 0;
    for (int d = 0; d < D; ++d) {
      const exactdot::Digits x = exactdot::digits(exactdot::scaled_int(q[d])), y = exactdot::digits(exactdot::scaled_int(k[d]));
      u[0] += std::int64_t{exactdot::toom_p1(x)} * exactdot::toom_p1(y);
      u[1] += std::int64_t{exactdot::toom_m1(x)} * exactdot::toom_m1(y);
      u[2] += std::int64_t{x.d[2]} * y.d[2];
      u[3] += std::int64_t{x.d[0]} * y.d[1] + std::int64_t{x.d[1]} * y.d[0];
      u[4] += std::int64_t{x.d[0]} * y.d[0];
      exact += std::int64_t{exactdot::scaled_int(q[d])} * exactdot::scaled_int(k[d]);
    }
    return exact;
  };
  const auto in32 = [](std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; };
  for (int c = 0; c < 256; ++c) {
    const exactdot::Digits g = exactdot::digits(exactdot::scaled_int(static_cast<std::uint8_t>(c)));
    CHECK(exactdot::toom_p1(g) == g.d[0] + g.d[1] + g.d[2]);  // no int8 wrap
    CHECK(exactdot::toom_m1(g) == g.d[0] - g.d[1] + g.d[2]);
  }
  std::mt19937_64 g(7);
  i64 bad = 0, checked = 0;
  std::int64_t worst_high = 0, worst_y = 0;
  for (int trial = 0; trial < 4000 + 256 * 256; ++trial) {
    std::uint8_t q[128], k[128];
    const int D = trial < 4000 ? 128 : 1;
    for (int d = 0; d < D; ++d) {
      std::uint8_t a, b;
      if (trial >= 4000) {
        a = static_cast<std::uint8_t>((trial - 4000) / 256), b = static_cast<std::uint8_t>((trial - 4000) % 256);
      } else if (trial < 16) {  // +-448 and the digit extremes, equal / alternating signs
        const std::uint8_t ext[4] = {0x7E, 0x5F, 0x67, 0x77};
        a = ext[trial % 4] | ((trial / 4) % 2 && d % 2 ? 0x80 : 0);
        b = ext[(trial / 2) % 4] | ((trial / 8) % 2 ? 0x80 : 0);
      } else {
        do a = static_cast<std::uint8_t>(g()), b = static_cast<std::uint8_t>(g()); while ((a & 0x7F) == 0x7F || (b & 0x7F) == 0x7F);
      }
      q[d] = a, k[d] = b;
    }
    std::int64_t u[5];
    const std::int64_t exact = unit_sums(q, k, D, u);
    bool ok = true;
    for (auto v : u) ok = ok && in32(v);
    const std::int64_t half = (65 * u[0] - 63 * u[1]) / 2, high = half + 4095 * u[2], low = 64 * u[3] + u[4];
    ok = ok && in32(65 * u[0]) && in32(63 * u[1]) && in32(65 * u[0] - 63 * u[1]) && in32(half) && in32(4095 * u[2]) && in32(high) &&
         in32(64 * u[3]) && in32(low) && (65 * u[0] - 63 * u[1]) % 2 == 0;
    worst_high = std::max(worst_high, std::abs(high));
    // the wgmma engine's steps, each an int32 value
    const std::int64_t x = 65 * u[0] - 63 * u[1], y1 = -64 * u[2], y2 = y1 + u[3], y3 = 64 * y2, y = y3 + u[4];
    ok = ok && in32(y1) && in32(y2) && in32(y3) && in32(y);
    worst_y = std::max(worst_y, std::abs(y));
    if (ok) ok = exactdot::wg_value(static_cast<std::int32_t>(x), static_cast<std::int32_t>(y)) == exact;
    ok = ok && 4096 * high - 4095 * low == exact;
    bad += !ok;
    ++checked;
  }
  CHECK(bad == 0);
  CHECK(checked == 4000 + 65536);
  CHECK(worst_high > (std::int64_t{1} << 30));  // the extremes came close to the int32 limit: the test can fail
  CHECK(worst_y > (std::int64_t{1} << 30));
}

TEST_CASE("numerics.f64_to_bf16_odd (device rounding of the logits) equals f64_to_bf16") {
  std::vector<double> v = {0.0, -0.0, 1.0, -1.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::max(), -std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(),
                           std::numeric_limits<double>::min(), static_cast<double>(std::numeric_limits<float>::max()),
                           static_cast<double>(std::numeric_limits<float>::denorm_min()), static_cast<double>(std::numeric_limits<float>::min()),
                           1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-60, 1.0 + 0x1p-8 - 0x1p-60, 1.0 + 3 * 0x1p-8, 0x1.fep127, 0x1.ffp127,
                           0x1.ff7fffffffp127, 0x1p-133, 0x1.8p-133, 0x1p-134, 0x1.0000000001p-134, 0x1p-200};
  std::mt19937_64 g(17);
  for (int i = 0; i < (1 << 20); ++i) {
    std::uint64_t u = g();
    if (i % 4 == 1) u = (u & 0xFFF0000000000000ull) | (g() & 0x0000FFFFFFFFFFFFull & ~0ull);  // random low bits
    if (i % 4 == 2) u = (std::uint64_t{0x380 + static_cast<unsigned>(g() % 0x100)} << 52) | ((g() & 0x7F) << 45) | (std::uint64_t{1} << 44) | (g() % 4 == 0 ? 0 : g() % 3);  // bf16 ties and near ties
    if (i % 4 == 3) u = (std::uint64_t{0x370 + static_cast<unsigned>(g() % 0x120)} << 52) | (g() & 0x000FFFFFFFFFFFFFull);  // fp32/bf16 range
    double d;
    std::memcpy(&d, &u, 8);
    if (g() & 1) d = -d;
    v.push_back(d);
  }
  i64 bad = 0;
  for (double d : v) {
    if (std::isnan(d)) continue;
    bad += exactdot::f64_to_bf16_odd(d) != f64_to_bf16(d);
  }
  CHECK(bad == 0);
}

// numerics/half_core.hpp and hd_ops.hpp: the DSA_HD conversions and exact operations the CUDA backend shares with the
// CPU references, against formats.cpp's generic encoder and std:: (the host side of the same definitions).
#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace {

// Doubles around every bf16 / fp16 / fp32 rounding point, with random low bits, plus the specials.
std::vector<double> conversion_probe_doubles() {
  std::vector<double> v = {0.0, -0.0, 1.0, -1.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::max(), std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                           static_cast<double>(std::numeric_limits<float>::max()), static_cast<double>(std::numeric_limits<float>::denorm_min()),
                           static_cast<double>(std::numeric_limits<float>::min()), 1.0 + 0x1p-8, 1.0 + 0x1p-8 + 0x1p-60, 1.0 + 0x1p-8 - 0x1p-60,
                           0x1.fep127, 0x1.ffp127, 0x1.ff7fffffffp127, 0x1p-133, 0x1.8p-133, 0x1p-134, 0x1.0000000001p-134, 0x1p-200,
                           65504.0, 65519.0, 65520.0, 0x1p-24, 0x1p-25, 0x1.8p-24, 0x1.0000001p-25, 0x1p-14, 0x1.ffcp-15};
  std::mt19937_64 g(29);
  for (int i = 0; i < (1 << 20); ++i) {
    std::uint64_t u = g();
    if (i % 4 == 1) u = (std::uint64_t{0x380 + static_cast<unsigned>(g() % 0x100)} << 52) | ((g() & 0x7F) << 45) | (std::uint64_t{1} << 44) | (g() % 4 == 0 ? 0 : g() % 3);
    if (i % 4 == 2) u = (std::uint64_t{0x370 + static_cast<unsigned>(g() % 0x120)} << 52) | (g() & 0x000FFFFFFFFFFFFFull);
    if (i % 4 == 3) u = (std::uint64_t{0x3E0 + static_cast<unsigned>(g() % 0x40)} << 52) | (g() & 0x000FFFFFFFFFFFFFull);  // fp16 range
    double d;
    std::memcpy(&d, &u, 8);
    v.push_back(g() & 1 ? -d : d);
  }
  return v;
}

}  // namespace

TEST_CASE("numerics.half_core: f64_to_bf16, f32_to_bf16, f32_to_fp16 equal formats.cpp's encoder bit for bit") {
  i64 bad = 0, n = 0;
  for (const double d : conversion_probe_doubles()) {
    bad += halfcore::f64_to_bf16(d) != f64_to_bf16_generic(d);
    const float f = static_cast<float>(d);
    bad += halfcore::f32_to_bf16(f) != f64_to_bf16_generic(static_cast<double>(f));
    bad += halfcore::f32_to_fp16(f) != f64_to_fp16(static_cast<double>(f));
    n += 3;
  }
  // Every fp32 whose 13 low bits are a rounding class (tie, just below / above it, zero, ones) for fp16, over all
  // 2^19 sign / exponent / high-mantissa patterns.
  const std::uint32_t lows[] = {0x0000u, 0x0001u, 0x0FFFu, 0x1000u, 0x1001u, 0x1FFFu, 0x0800u};
  for (std::uint32_t hi = 0; hi < (1u << 19); ++hi)
    for (const std::uint32_t lo : lows) {
      const float f = f32_from_bits((hi << 13) | lo);
      bad += halfcore::f32_to_fp16(f) != f64_to_fp16(static_cast<double>(f));
      ++n;
    }
  // Every bf16 pattern with every 16-bit rounding class below it.
  const std::uint32_t lows16[] = {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu};
  for (std::uint32_t hi = 0; hi < (1u << 16); ++hi)
    for (const std::uint32_t lo : lows16) {
      const float f = f32_from_bits((hi << 16) | lo);
      bad += halfcore::f32_to_bf16(f) != f64_to_bf16_generic(static_cast<double>(f));
      bad += halfcore::f64_to_bf16(static_cast<double>(f)) != f64_to_bf16_generic(static_cast<double>(f));
      n += 2;
    }
  CHECK(bad == 0);
  CHECK(n > (1 << 22));
  CHECK(num::f32_to_bf16(1.0f + 0x1p-8f) == halfcore::f32_to_bf16(1.0f + 0x1p-8f));
}

TEST_CASE("numerics.hd_ops: frexp exponent, ilogb, nextafter, pow2, rint equal std:: on the host") {
  std::mt19937_64 g(31);
  i64 bad = 0;
  std::vector<double> v = {0x1p-1074, 0x1p-1022, 0x1.fffffffffffffp-1023, 1.0, 0.75, 3.0, 0x1.fffffffffffffp1023, 0x1p-133, 65504.0};
  for (int i = 0; i < (1 << 18); ++i) {
    std::uint64_t u = g() & 0x7FEFFFFFFFFFFFFFull;
    if (i % 2) u = (std::uint64_t{0x300 + static_cast<unsigned>(g() % 0x200)} << 52) | (g() & 0x000FFFFFFFFFFFFFull);
    double d;
    std::memcpy(&d, &u, 8);
    if (d != 0) v.push_back(g() & 1 ? -d : d);
  }
  for (const double d : v) {
    int e;
    (void)std::frexp(d, &e);
    bad += hd::frexp_exp(d) != e;
    bad += hd::ilogb(d) != std::ilogb(d);
    const float f = static_cast<float>(d);
    for (const bool up : {false, true}) {
      const float a = hd::next_toward(f, up), b = std::nextafter(f, up ? INFINITY : -INFINITY);
      bad += f32_bits(a) != f32_bits(b);
    }
    const float r = static_cast<float>(d * 0x1p-40);
    bad += f32_bits(hd::rint(r)) != f32_bits(std::nearbyint(r));
  }
  for (const float f : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::denorm_min(), 0.5f, -2.5f, 2.5f, 3.5f, -0.5f})
    for (const bool up : {false, true}) {
      bad += f32_bits(hd::next_toward(f, up)) != f32_bits(std::nextafter(f, up ? INFINITY : -INFINITY));
      bad += f32_bits(hd::rint(f)) != f32_bits(std::nearbyint(f));
    }
  for (int k = -1074; k <= 1023; ++k) bad += hd::pow2(k) != std::ldexp(1.0, k);
  CHECK(bad == 0);
}

TEST_CASE("numerics.half_core (the DSA_HD conversions of the lightning-indexer kernels) equals formats.hpp bit for bit") {
  auto f32b = [](float x) { return f32_bits(x); };
  i64 bad = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    bad += f32b(halfcore::fp16_to_f32(h)) != f32b(fp16_to_f32(h));
    bad += f32b(halfcore::bf16_to_f32(h)) != f32b(bf16_to_f32(h));
  }
  for (std::uint32_t c = 0; c < 256; ++c)
    bad += f32b(halfcore::e4m3_to_f32(static_cast<std::uint8_t>(c))) != f32b(e4m3_to_f32(static_cast<std::uint8_t>(c)));
  CHECK(bad == 0);
  // f64 -> fp16: every fp16 value, the midpoints between neighbours and one f64 ulp either side of each (the
  // subnormal / normal / overflow edges among them: 2^-25, 65504..65520), then random doubles across the range.
  std::vector<double> v = {0.0, -0.0, std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                           std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max(), 0x1p-25, 0x1p-26, 65520.0, 65536.0};
  for (std::uint32_t b = 0; b < 0x7C00; ++b) {
    const double x = fp16_to_f64(static_cast<std::uint16_t>(b)), y = fp16_to_f64(static_cast<std::uint16_t>(b + 1));
    const double m = b + 1 == 0x7C00 ? 65520.0 : (x + y) / 2;  // exact (a few more bits than fp16)
    for (double d : {x, m, std::nextafter(m, 0.0), std::nextafter(m, 1e300), std::nextafter(x, 1e300)}) v.push_back(d), v.push_back(-d);
  }
  std::mt19937_64 g(23);
  for (int i = 0; i < (1 << 20); ++i) {
    std::uint64_t u = g();
    if (i % 2) u = (std::uint64_t{0x3C0 + static_cast<unsigned>(g() % 0x60)} << 52) | (g() & 0x000FFFFFFFFFFFFFull);  // near fp16 range
    double d;
    std::memcpy(&d, &u, 8);
    v.push_back(d);
  }
  for (double d : v) bad += halfcore::f64_to_fp16(d) != f64_to_fp16(d);
  CHECK(bad == 0);
}

TEST_CASE("numerics.bf16_to_f64_n and add_abs_n (vectorized row loops) equal the scalar conversion and sums bit for bit") {
  // Every bf16 pattern (NaNs with payloads, subnormals, +-0, +-inf) at once and at odd offsets and lengths (the vector
  // loops' heads and tails); add_abs_n against acc + |x| element by element, with NaN, inf and -0 among x.
  std::vector<std::uint16_t> bits(65536 + 9);
  for (std::size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<std::uint16_t>(i * 40503u);
  i64 bad = 0, n = 0;
  for (const std::size_t off : {std::size_t{0}, std::size_t{1}, std::size_t{3}})
    for (const std::size_t len : {bits.size() - off, std::size_t{1}, std::size_t{7}, std::size_t{13}, std::size_t{0}}) {
      std::vector<double> out(len + 1, -1.0);
      num::bf16_to_f64_n(bits.data() + off, static_cast<i64>(len), out.data());
      for (std::size_t i = 0; i < len; ++i) {
        const double w = num::bf16_to_f64(bits[off + i]);
        bad += std::memcmp(&out[i], &w, 8) != 0;
        ++n;
      }
      bad += out[len] != -1.0;  // nothing written past n
    }
  CHECK(bad == 0);
  CHECK(n > 3 * 65536);
  std::mt19937_64 g(23);
  std::vector<double> x(1000), acc(1000), want(1000);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = std::ldexp(static_cast<double>(static_cast<std::int64_t>(g() >> 11)) * (g() & 1 ? -1.0 : 1.0), static_cast<int>(g() % 200) - 100 - 53);
    acc[i] = std::ldexp(static_cast<double>(g() >> 11), static_cast<int>(g() % 200) - 100 - 53);
  }
  x[5] = std::numeric_limits<double>::quiet_NaN(), x[6] = -std::numeric_limits<double>::infinity(), x[7] = -0.0;
  bad = 0;
  for (const std::size_t len : {x.size(), std::size_t{1}, std::size_t{5}, std::size_t{999}}) {
    std::vector<double> a(acc.begin(), acc.end());
    for (std::size_t i = 0; i < x.size(); ++i) want[i] = i < len ? acc[i] + std::fabs(x[i]) : acc[i];
    num::add_abs_n(x.data(), static_cast<i64>(len), a.data());
    for (std::size_t i = 0; i < x.size(); ++i) bad += std::memcmp(&a[i], &want[i], 8) != 0 && !(std::isnan(a[i]) && std::isnan(want[i]));
  }
  CHECK(bad == 0);
}

TEST_CASE("numerics.e4m3_times_scale_bf16 (the vectorized cache dequant) equals the scalar bf16(e4m3 * s) on every code") {
  // All 256 codes (NaN codes, subnormals, +-0, 448) at once, odd lengths (the vector loops' tails), times scales that
  // are powers of two, not, subnormal, huge (products overflow fp32 or round up to inf), zero, inf and NaN.
  std::vector<std::uint8_t> codes(256 * 3 + 5);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>((i * 37 + i / 256) & 0xFF);
  const float scales[] = {1.0f, 0.0078125f, 1.0f / 448.0f, 3.1415927f, -2.5e-3f, 1e-40f, 3.0e35f, 1.0e38f,
                          0.0f, -0.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  i64 bad = 0, n = 0;
  for (int path = 0; path <= 2; ++path) {
    if (path > num::e4m3_scale_paths()) {
      MESSAGE("skipped: this CPU lacks the " << (path == 2 ? "AVX-512F" : "AVX2") << " dequant path (tested where it runs)");
      continue;
    }
    for (const float s : scales)
      for (const std::size_t len : {codes.size(), std::size_t{1}, std::size_t{7}, std::size_t{33}}) {
        std::vector<double> out(len, -1.0);
        num::e4m3_times_scale_bf16(codes.data(), static_cast<i64>(len), s, out.data(), path);
        for (std::size_t i = 0; i < len; ++i) {
          const float want = num::bf16_to_f32(num::f64_to_bf16_generic(static_cast<double>(num::e4m3_to_f32(codes[i]) * s)));
          const double w = static_cast<double>(want);
          // (A NaN product's sign depends on which operand the multiply takes it from: NaN matches NaN.)
          bad += std::memcmp(&out[i], &w, 8) != 0 && !(std::isnan(out[i]) && std::isnan(w));
          ++n;
        }
      }
  }
  CHECK(bad == 0);
  CHECK(n > 9000);
}
