// engines/quant/byte_cands: the candidate bytes a writer judged from bounded values accepts. Values are placed at
// exact bf16 / e4m3 / e2m1 rounding boundaries, worked out by hand: a bound reaching across a boundary adds the
// neighbouring byte, one that does not adds nothing.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engines/quant/byte_cands.hpp"
#include "numerics/formats.hpp"

using namespace dsa;

namespace {
bool has(const std::vector<std::uint8_t>& v, std::uint8_t b) { return std::find(v.begin(), v.end(), b) != v.end(); }
const std::vector<std::uint8_t>* alt_at(const quant::ByteOut& o, std::int64_t off) {
  for (const auto& [k, v] : o.alt)
    if (k == off) return &v;
  return nullptr;
}
std::uint8_t ref_at(const quant::ByteOut& o, std::int64_t off) {
  for (const auto& [k, v] : o.ref)
    if (k == off) return v;
  FAIL("no reference byte at " << off);
  return 0;
}
}  // namespace

TEST_CASE("byte candidates: bf16 roundings a bound reaches") {
  // 1 + 2^-8 is the midpoint of bf16 1 and 1 + 2^-7: RNE gives 1 (even); a bound of 2^-20 reaches 1 + 2^-7 too.
  const double mid = 1.0 + 0x1p-8;
  CHECK(quant::bf16_cands(mid, 0).size() == 1);
  const auto c = quant::bf16_cands(mid, 0x1p-20);
  REQUIRE(c.size() == 2);
  CHECK(num::bf16_to_f64(c[0]) == 1.0);
  CHECK(num::bf16_to_f64(c[1]) == 1.0 + 0x1p-7);
  CHECK(quant::bf16_cands(1.0 + 0x1p-9, 0x1p-20).size() == 1);  // far from a midpoint
}

TEST_CASE("byte candidates: fp8 block codes and scales across the bound") {
  // amax 448: scale 2^0 (e = ceil(log2(448 * fl32(1/448))) = 0). Element 1 sits at the bf16 midpoint 1 + 2^-8 within
  // 2^-20, so its bf16 is 1 or 1 + 2^-7; e4m3 of 1 + 2^-7 is still 1 (e4m3's step at 1 is 1/8): one code. Element 2 at
  // 1.0625 + 2^-8 (the bf16 midpoint of 1.0625, the e4m3 midpoint of 1 and 1.125, and 1.0703125): bf16 1.0625 (-> e4m3 tie to
  // even 1.0) or 1.0703125 (-> 1.125): two codes.
  std::vector<double> y(128, 0.0), ey(128, 0.0);
  y[0] = 448;
  y[1] = 1.0 + 0x1p-8, ey[1] = 0x1p-20;
  y[2] = 1.0625 + 0x1p-8, ey[2] = 0x1p-20;
  const auto q = quant::fp8_block_cands(y.data(), ey.data(), 128, quant::ue8m0_rule());
  CHECK(q.scale == 1.0f);
  CHECK(q.scales.size() == 1);
  auto distinct = [](std::vector<std::uint8_t> v) {
    std::sort(v.begin(), v.end());
    return static_cast<int>(std::unique(v.begin(), v.end()) - v.begin());
  };
  CHECK(distinct(q.codes[1]) == 1);
  CHECK(distinct(q.codes[2]) == 2);
  CHECK(q.codes[2][0] == 0x38);  // e4m3 1.0 (the exact value's bf16 1.0625 is the tie, to even)
  CHECK(has(q.codes[2], 0x39));  // 1.125
  // The amax itself uncertain across 448 * 2^0 -> the next scale (ceil): 448 + a bound that reaches 449.75.
  ey[0] = 2.0;
  const auto q2 = quant::fp8_block_cands(y.data(), ey.data(), 128, quant::ue8m0_rule());
  CHECK(q2.scales.size() == 2);
  CHECK((q2.scales[1] == 2.0f || q2.scales[1] == 0.5f));
}

TEST_CASE("byte candidates: MXFP4 nibbles pair under one scale, the scale byte's own candidates") {
  // amax 6: e = ceil(log2(6 * fl32(1/6))) = 0, byte 127. Element 2 = 0.75 + 2^-9 (bf16 of it: 0.75 tie region? no:
  // 0.75 + 2^-9 is the bf16 midpoint of 0.75 and 0.75 + 2^-8), within 2^-20: bf16 0.75 (e2m1 tie -> 1.0, code 2)
  // or 0.75390625 (-> 1.0, code 2): one code. Element 3 = 0.25 + 2^-10 (bf16 midpoint of 0.25 and 0.25 + 2^-9):
  // bf16 0.25 (e2m1 tie 0 / 0.5 -> 0, code 0) or 0.251953125 (-> 0.5, code 1): byte 1 = nibbles (code(2), code(3))
  // = 0x02 | {0x00, 0x10}.
  std::vector<double> y(32, 0.0), ey(32, 0.0);
  y[0] = 6;
  y[2] = 0.75 + 0x1p-9, ey[2] = 0x1p-20;
  y[3] = 0.25 + 0x1p-10, ey[3] = 0x1p-20;
  quant::ByteOut o;
  quant::mxfp4_block_cands(y.data(), ey.data(), fp4core::Mx4Rule::ref, {}, o, 0, 100);
  CHECK(ref_at(o, 100) == 127);
  CHECK(alt_at(o, 100) == nullptr);
  CHECK(ref_at(o, 0) == 0x07);  // 6 -> code 7, element 1 = 0 -> code 0
  CHECK(ref_at(o, 1) == 0x02);
  const auto* a = alt_at(o, 1);
  REQUIRE(a != nullptr);
  CHECK(*a == std::vector<std::uint8_t>{0x12});
  CHECK(alt_at(o, 2) == nullptr);
  // amax 6 with a bound that reaches past 6 * 2^0: the scale byte 128 becomes a candidate.
  ey[0] = 0.5;
  quant::ByteOut o2;
  quant::mxfp4_block_cands(y.data(), ey.data(), fp4core::Mx4Rule::ref, {}, o2, 0, 100);
  REQUIRE(alt_at(o2, 100) != nullptr);
  CHECK(has(*alt_at(o2, 100), 128));
}
