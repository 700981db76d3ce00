// flashmla-sm90 emulation pieces (src/profiles/flashmla_sm90): the integer WGMMA k-step against the model's exact
// double form, the decode scheduler against the real kernel's num_splits, the lg2 bounds below 1. Test names: flashmla.*
#include <doctest/doctest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "numerics/formats.hpp"
#include "profiles/flashmla_sm90/decode_emu.hpp"
#include "profiles/flashmla_sm90/prefill_emu.hpp"
#include "profiles/flashmla_sm90/sm90_ops.hpp"

using namespace dsa::profiles::flashmla_emu;

namespace {
// reference/flashmla_sm90.py wgmma_chunk, written independently in doubles: products exact, alignment exponent e =
// max(ea + eb over non-zero products, ilogb(acc)), terms truncated to multiples of 2^(e - 25), the sum to 24 bits.
double model_k16(double acc, const double* a, const double* b) {
  int e = INT_MIN;
  for (int j = 0; j < 16; ++j)
    if (a[j] != 0 && b[j] != 0) e = std::max(e, std::ilogb(a[j]) + std::ilogb(b[j]));
  if (acc != 0) e = std::max(e, std::ilogb(acc));
  if (e == INT_MIN) return acc;
  const double q = std::ldexp(1.0, e - 25);
  double t = std::trunc(acc / q) * q;
  for (int j = 0; j < 16; ++j) t += std::trunc(a[j] * b[j] / q) * q;
  if (t == 0) return 0.0;
  const double qq = std::ldexp(1.0, std::ilogb(t) - 23);
  return std::trunc(t / qq) * qq;
}
}  // namespace

TEST_CASE("flashmla.wgmma_k16: the integer k-step equals the model's double form") {
  std::mt19937_64 rng(39);
  std::uniform_int_distribution<int> bits(0, 0xFFFF), spread(-40, 40), pick(0, 9);
  long n = 0;
  for (int it = 0; it < 200000; ++it) {
    double a[16], b[16];
    ops::Op oa[16], ob[16];
    const int ea = spread(rng), eb = spread(rng);
    for (int j = 0; j < 16; ++j) {
      auto draw = [&](int e0) {  // a bf16 value near 2^e0 (zero one time in ten, wide exponent spread sometimes)
        if (pick(rng) == 0) return 0.0;
        const std::uint16_t m = static_cast<std::uint16_t>(bits(rng) & 0x807F);
        const int e = e0 + (pick(rng) < 3 ? spread(rng) : pick(rng) - 4);
        return static_cast<double>(dsa::num::bf16_to_f32(static_cast<std::uint16_t>(m | ((std::clamp(e + 127, 1, 254)) << 7))));
      };
      a[j] = draw(ea), b[j] = draw(eb);
      oa[j] = ops::op(a[j]), ob[j] = ops::op(b[j]);
    }
    double acc = 0;
    if (pick(rng) > 1) {  // an fp32 accumulator near the products' scale (or far from it)
      const float f = std::ldexp(static_cast<float>(static_cast<std::int32_t>(rng() >> 40) | 1), ea + eb - 24 + spread(rng) / 4);
      acc = static_cast<double>(f);
    }
    const double want = model_k16(acc, a, b), got = ops::wgmma_k16(acc, oa, ob);
    if (want != got || std::signbit(want) != std::signbit(got)) {
      CHECK(want == got);
      if (++n > 5) break;
    }
  }
  CHECK(n == 0);
  // Hand-checked: 1 + 2^-30 (the small product is below 2^(0 - 25): cut) -> 1; 1 - 1.5 2^-25 (the product truncates
  // to -2^-25, the sum 1 - 2^-25 to 24 bits) -> 1 - 2^-24.
  ops::Op oa[16], ob[16];
  oa[0] = ops::op(1.0), oa[1] = ops::op(std::ldexp(1.0, -30)), ob[0] = ops::op(1.0), ob[1] = ops::op(1.0);
  CHECK(ops::wgmma_k16(0.0, oa, ob) == 1.0);
  oa[1] = ops::op(-1.5 * std::ldexp(1.0, -25));
  CHECK(ops::wgmma_k16(0.0, oa, ob) == 1.0 - std::ldexp(1.0, -24));
}

TEST_CASE("flashmla.decode_schedule: the real kernel's split counts") {
  // dec_v32_h64_b2_sq1_t512_partials_s0 on an H100 (132 SMs): num_splits [0, 8, 16] (the capture's num_splits.npy).
  DecodeCall c;
  c.b = 2, c.s_q = 1, c.h_q = 64, c.d_qk = 576, c.topk = 512, c.num_sms = 132;
  std::vector<SchedPart> parts;
  std::vector<std::int64_t> ns;
  decode_schedule(c, parts, ns);
  CHECK(ns == std::vector<std::int64_t>{0, 8, 16});
  CHECK(parts.size() == 132);
  CHECK((parts[0].begin_req == 0 && parts[0].begin_block == 0 && parts[0].end_block == 1 && parts[0].last_split));
  CHECK(parts[16].begin_req >= 2);  // the payload (1 block + 5) leaves the later parts empty
  // 16 SMs (an H100 MIG 1g slice): payload ceil(26 / 16) + 5 = 7, two blocks per part.
  c.num_sms = 16;
  decode_schedule(c, parts, ns);
  CHECK(ns == std::vector<std::int64_t>{0, 4, 8});
}

TEST_CASE("flashmla.lg2_unmeasured_bounds: a bracket 2^-22 wide on each side") {
  for (float x : {0.5f, 0.75f, 0.99999994f, 1e-3f}) {
    float lo, hi;
    lg2_unmeasured_bounds(x, lo, hi);
    const double l = std::log2(static_cast<double>(x));
    CHECK(static_cast<double>(lo) <= l - 0x1p-22);
    CHECK(static_cast<double>(hi) >= l + 0x1p-22);
    CHECK(static_cast<double>(std::nextafter(lo, INFINITY)) > l - 0x1p-22);
    CHECK(static_cast<double>(std::nextafter(hi, -INFINITY)) < l + 0x1p-22);
  }
}
