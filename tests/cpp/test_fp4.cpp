// The V4.1 codecs (numerics/fp4_core.hpp): e2m1 against a brute-force nearest search over every bf16 value, every
// midpoint under both tie rules and both zero-sign rules, and the block quantizers on blocks whose codes and scales
// are worked out by hand below (ties at 0.25 / 0.75 / 1.75 / 3.5 of the scale, sub-floor blocks, NaN blocks).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <ios>
#include <limits>
#include <vector>

#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"

using namespace dsa;
using namespace dsa::fp4core;

namespace {
const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The nearest e2m1 index of |x| by search (ties: rne -> the even index, half_down -> the smaller), saturating at 6.
unsigned nearest_index(double a, Tie tie) {
  if (a >= 6.0) return 7;
  unsigned best = 0;
  for (unsigned i = 1; i < 8; ++i) {
    const double d = std::fabs(a - kMag[i]), db = std::fabs(a - kMag[best]);
    if (d < db) best = i;
    else if (d == db) best = tie == Tie::half_down ? best : ((i % 2 == 0) ? i : best);
  }
  return best;
}
}  // namespace

TEST_CASE("fp4: e2m1 decode of the 16 nibbles, encode of each value back") {
  for (unsigned n = 0; n < 16; ++n) {
    const float v = e2m1_to_f32(static_cast<std::uint8_t>(n));
    CHECK(std::fabs(v) == kMag[n & 7]);
    CHECK(std::signbit(v) == ((n & 8) != 0));
    CHECK(f32_to_e2m1(v, {}) == n);  // -0.0 (0x8) keeps its sign under ZeroSign::keep
  }
  CHECK(f32_to_e2m1(-0.0f, {Tie::rne, ZeroSign::clear, NanCode::zero}) == 0);
}

TEST_CASE("fp4: e2m1 encode equals a nearest search for every bf16 value, both tie rules and zero-sign rules") {
  for (Tie tie : {Tie::rne, Tie::half_down})
    for (ZeroSign zs : {ZeroSign::keep, ZeroSign::clear})
      for (std::uint32_t b = 0; b < 65536; ++b) {
        const float x = num::bf16_to_f32(static_cast<std::uint16_t>(b));
        const std::uint8_t got = f32_to_e2m1(x, {tie, zs, NanCode::zero});
        if (std::isnan(x)) {
          CHECK(got == 0);
          continue;
        }
        const unsigned idx = nearest_index(std::fabs(static_cast<double>(x)), tie);
        const unsigned want = idx == 0 && zs == ZeroSign::clear ? 0u : ((std::signbit(x) ? 8u : 0u) | idx);
        if (got != want) FAIL_CHECK("bf16 0x" << std::hex << b << ": got " << unsigned(got) << " want " << want);
      }
}

TEST_CASE("fp4: e2m1 midpoints under rne and half_down, saturation, NaN codes") {
  const E2m1Opts rne{Tie::rne, ZeroSign::keep, NanCode::zero}, down{Tie::half_down, ZeroSign::keep, NanCode::zero};
  // midpoint -> (rne index, half_down index)
  const struct {
    float x;
    unsigned r, d;
  } m[] = {{0.25f, 0, 0}, {0.75f, 2, 1}, {1.25f, 2, 2}, {1.75f, 4, 3}, {2.5f, 4, 4}, {3.5f, 6, 5}, {5.0f, 6, 6}};
  for (const auto& t : m) {
    CHECK(f32_to_e2m1(t.x, rne) == t.r);
    CHECK(f32_to_e2m1(t.x, down) == t.d);
    CHECK(f32_to_e2m1(-t.x, rne) == (8u | t.r));
    CHECK(f32_to_e2m1(std::nextafter(t.x, 10.0f), down) == t.d + 1);  // just above: the upper value either way
  }
  CHECK(f32_to_e2m1(-0.25f, rne) == 0x8);  // rounds to -0: the sign kept (FlashMLA test / PTX)
  CHECK(f32_to_e2m1(-0.25f, {Tie::rne, ZeroSign::clear, NanCode::zero}) == 0x0);  // DeepGEMM
  CHECK(f32_to_e2m1(7.0f, rne) == 7);
  CHECK(f32_to_e2m1(-std::numeric_limits<float>::infinity(), rne) == 0xF);
  CHECK(f32_to_e2m1(std::numeric_limits<float>::quiet_NaN(), rne) == 0);
  CHECK(f32_to_e2m1(-std::numeric_limits<float>::quiet_NaN(), {Tie::rne, ZeroSign::keep, NanCode::max}) == 0xF);
}

TEST_CASE("fp4: MXFP8 blocks: the amax floor on amax (REF) or on the scale (FlashMLA test)") {
  std::vector<float> x(32, 0.0f);
  std::uint8_t codes[32], sb = 0;
  // amax 448: t = fl32(448 * fl32(1/448)) = 1 (the product 1.0000000447 rounds to 1) -> e = 0, byte 127, codes exact.
  x[0] = 448.0f;
  x[1] = -1.5f;
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 255);
  CHECK(sb == 127);
  CHECK(codes[0] == num::f32_to_e4m3(448.0f));
  CHECK(codes[1] == num::f32_to_e4m3(-1.5f));
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::flashmla, 255);
  CHECK(sb == 127);
  // amax 449: t > 1 -> e = 1, byte 128, x / 2 (224.5 rounds to 224 in e4m3: the step there is 16... 224 exact? 224
  // = 1.75 * 2^7, representable; 224.5 -> 224).
  x[0] = 449.0f;
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 255);
  CHECK(sb == 128);
  CHECK(num::e4m3_to_f32(codes[0]) == 224.0f);
  // amax 0.01 (< 0.0448): REF floors amax at 1e-4, which is below 0.01: t = fl32(0.01 * fl32(1/448)) = 2.23e-5 ->
  // e = ceil(log2 2.23e-5) = -15; FlashMLA floors the scale at 1e-4: max(0.01/448 = 2.23e-5, 1e-4) = 1e-4 -> e = -13.
  std::fill(x.begin(), x.end(), 0.0f);
  x[5] = 0.01f;
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 255);
  CHECK(sb == 127 - 15);
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::flashmla, 255);
  CHECK(sb == 127 - 13);
  // an all-zero block: REF e = ceil(log2(fl32(1e-4 * fl32(1/448)))) = ceil(log2 2.2321e-7) = -22; FlashMLA -13.
  x[5] = 0.0f;
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 255);
  CHECK(sb == 127 - 22);
  for (int i = 0; i < 32; ++i) CHECK(codes[i] == 0);
  // a NaN: scale byte 0xFF, NaN codes
  x[3] = std::numeric_limits<float>::quiet_NaN();
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 255);
  CHECK(sb == 0xFF);
  CHECK((codes[0] & 0x7F) == 0x7F);
  // an inf: e = 128, byte 255 clamped to 254 on gfx950; the inf's code 448, the others 0
  x[3] = std::numeric_limits<float>::infinity();
  x[4] = 1.0f;
  mxfp8_block(x.data(), codes, &sb, Mx8Rule::ref, 254);
  CHECK(sb == 254);
  CHECK(codes[3] == num::f32_to_e4m3(448.0f));
  CHECK(codes[4] == 0);
}

TEST_CASE("fp4: NVFP4 blocks: scale rules, ties at 0.75 / 1.75 / 3.5 of the scale, sub-floor blocks, FlashMLA's NaN scale") {
  std::vector<float> x(16, 0.0f);
  std::uint8_t packed[8], sb = 0;
  const E2m1Opts rne{}, down{Tie::half_down, ZeroSign::keep, NanCode::zero};
  // amax 6 -> s = e4m3(1) = 1 under every rule; x/s are the values themselves: 0.75, 1.75, 3.5 are ties.
  x[0] = 6.0f, x[1] = 0.75f, x[2] = 1.75f, x[3] = 3.5f, x[4] = -0.25f;
  for (Nv4Rule r : {Nv4Rule::ref, Nv4Rule::vllm, Nv4Rule::flashmla}) {
    nvfp4_block(x.data(), packed, &sb, r, rne);
    CHECK(num::e4m3_to_f32(sb) == 1.0f);
    CHECK(packed[0] == (7 | (2 << 4)));    // 6 -> 7; 0.75 -> 1.0 (index 2, even)
    CHECK(packed[1] == (4 | (6 << 4)));    // 1.75 -> 2 (4); 3.5 -> 4 (6)
    CHECK(packed[2] == 0x8);               // -0.25 -> -0 (sign kept), 0 -> 0
  }
  nvfp4_block(x.data(), packed, &sb, Nv4Rule::vllm, down);
  CHECK(packed[0] == (7 | (1 << 4)));  // half_down: 0.75 -> 0.5 (1)
  CHECK(packed[1] == (3 | (5 << 4)));  // 1.75 -> 1.5 (3); 3.5 -> 3 (5)
  // amax 12: s = e4m3(2) = 2 (12/6 and 12 * fl32(1/6) = 2.0000000298 both round to 2 in e4m3); 7 / 2 = 3.5 a tie.
  std::fill(x.begin(), x.end(), 0.0f);
  x[0] = 12.0f, x[1] = 7.0f;
  nvfp4_block(x.data(), packed, &sb, Nv4Rule::ref, rne);
  CHECK(sb == num::f32_to_e4m3(2.0f));
  CHECK(packed[0] == (7 | (6 << 4)));
  // a sub-floor block (amax 0.001 < 6 * 2^-9): the scale is 2^-9 under every rule (ref: max(amax, 6*2^-9) / 6)
  std::fill(x.begin(), x.end(), 0.0f);
  x[2] = 0.001f;
  for (Nv4Rule r : {Nv4Rule::ref, Nv4Rule::vllm, Nv4Rule::flashmla}) {
    nvfp4_block(x.data(), packed, &sb, r, rne);
    CHECK(num::e4m3_to_f32(sb) == std::ldexp(1.0f, -9));
    CHECK(packed[1] == 1);  // 0.001 / 2^-9 = 0.512 -> 0.5 (index 1)
  }
  // ref has no upper clamp: amax 6 * 500 -> 500 > 464 -> e4m3 NaN; vllm / flashmla clamp to 448.
  x[2] = 3000.0f;
  nvfp4_block(x.data(), packed, &sb, Nv4Rule::ref, rne);
  CHECK((sb & 0x7F) == 0x7F);
  nvfp4_block(x.data(), packed, &sb, Nv4Rule::vllm, rne);
  CHECK(num::e4m3_to_f32(sb) == 448.0f);
  // FlashMLA's test: an inf in the block gives a NaN scale and NaN codes 0
  x[2] = std::numeric_limits<float>::infinity();
  x[3] = 1.0f;
  nvfp4_block(x.data(), packed, &sb, Nv4Rule::flashmla, rne);
  CHECK(sb == 0x7F);
  CHECK(packed[1] == 0);
}

TEST_CASE("fp4: MXFP4 blocks: ceil vs nearest exponent, ties at 0.25 / 1.75 of the scale, the amax floor") {
  std::vector<float> x(32, 0.0f);
  std::uint8_t packed[16], sb = 0;
  const E2m1Opts rne{};
  // amax 6: t = fl32(6 * fl32(1/6)) = 1 -> e = 0; values 1.75 and 0.25 are ties (-> 2 and 0).
  x[0] = 6.0f, x[1] = 1.75f, x[2] = 0.25f, x[3] = -5.0f;
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::ref, rne);
  CHECK(sb == 127);
  CHECK(packed[0] == (7 | (4 << 4)));
  CHECK(packed[1] == (0 | ((8 | 6) << 4)));  // 0.25 -> 0; -5 -> -4 (tie to the even index 6)
  // amax 7: ceil(log2(7/6)) = 1 -> scale 2; nearest: log2(7/6) = 0.22 -> 0, 7 / 1 saturates to 6.
  x[0] = 7.0f;
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::ref, rne);
  CHECK(sb == 128);
  CHECK((packed[0] & 0xF) == 6);  // 7 / 2 = 3.5: a tie between 3 and 4, RNE to 4 (index 6)
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::nearest, rne);
  CHECK(sb == 127);
  CHECK((packed[0] & 0xF) == 7);
  // amax 0 (all zero): the floor 6 * 2^-126 -> t = 2^-126 -> e = -126 under ref; nearest gives -127
  std::fill(x.begin(), x.end(), 0.0f);
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::ref, rne);
  CHECK(sb == 1);
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::nearest, rne);
  CHECK(sb == 0);
  // a NaN: 0xFF, NaN codes 0
  x[9] = std::numeric_limits<float>::quiet_NaN();
  x[10] = 1.0f;
  mxfp4_block(x.data(), packed, &sb, Mx4Rule::ref, rne);
  CHECK(sb == 0xFF);
  CHECK(packed[5] == 0);
}
