// The V4.1 record layouts (layouts/v41_records.hpp): byte positions in both orders, describe(), the page rule, and a
// store / load round trip that touches exactly the token's bytes and dequantizes to the block quantizers' values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "layouts/v41_records.hpp"
#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"

using namespace dsa;
using namespace dsa::layouts;

TEST_CASE("v41 records: offsets of page 1 token 3 in both orders, and the 512-byte page rule") {
  V41Record m{V41Record::Kind::mxfp8_528, RecordOrder::page_segregated, 32};
  CHECK(m.record_bytes() == 528);
  CHECK(m.data_offset(35) == 528 * 32 + 3 * 512);
  CHECK(m.scale_offset(35) == 528 * 32 + 512 * 32 + 3 * 16);
  CHECK(m.page_problem().empty());
  m.order = RecordOrder::token_interleaved;
  CHECK(m.data_offset(35) == 35 * 528);
  CHECK(m.scale_offset(35) == 35 * 528 + 512);
  m.page_size = 16;  // 8448 bytes: not a multiple of 512
  CHECK(m.page_problem().find("multiple of 32") != std::string::npos);
  V41Record n{V41Record::Kind::nvfp4_288, RecordOrder::page_segregated, 64};
  CHECK(n.record_bytes() == 288);
  CHECK(n.data_offset(67) == 288 * 64 + 3 * 256);
  CHECK(n.scale_offset(67) == 288 * 64 + 256 * 64 + 3 * 32);
  CHECK(n.page_problem().empty());
  n.page_size = 8;
  CHECK(n.page_problem().find("multiple of 16") != std::string::npos);
  CHECK(parse_record_order("token_interleaved") == RecordOrder::token_interleaved);
  CHECK(!parse_record_order("interleaved"));
}

TEST_CASE("v41 records: describe names page, token, dim or scale") {
  const V41Record m{V41Record::Kind::mxfp8_528, RecordOrder::page_segregated, 32};
  CHECK(m.describe(m.data_offset(35) + 40) == "page 1 token 3 dim 40 (e4m3 code, scale 1)");
  CHECK(m.describe(m.scale_offset(35) + 5) == "page 1 token 3 scale 5 (ue8m0, dims 160..191)");
  const V41Record n{V41Record::Kind::nvfp4_288, RecordOrder::token_interleaved, 64};
  CHECK(n.describe(n.data_offset(67) + 3) == "page 1 token 3 dims 6,7 (e2m1 nibbles, scale 0)");
  CHECK(n.describe(n.scale_offset(67) + 31) == "page 1 token 3 scale 31 (e4m3, dims 496..511)");
}

TEST_CASE("v41 records: store writes only the token's bytes, load gives the exact dequantized values") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto kind : {V41Record::Kind::mxfp8_528, V41Record::Kind::nvfp4_288})
    for (auto order : {RecordOrder::page_segregated, RecordOrder::token_interleaved}) {
      const V41Record r{kind, order, 32};
      std::vector<std::uint8_t> cache(static_cast<std::size_t>(r.page_bytes() * 3), 0xA5), before = cache;
      std::vector<float> x(512);
      for (auto& v : x) v = num::round_to_bf16(nd(rng) * 3.0f);
      const std::int64_t slot = 32 + 17;
      v41_store_token(r, x.data(), slot, cache.data(), {});
      for (std::size_t b = 0; b < cache.size(); ++b) {
        const auto o = static_cast<std::int64_t>(b);
        const bool mine = (o >= r.data_offset(slot) && o < r.data_offset(slot) + r.data_bytes()) ||
                          (o >= r.scale_offset(slot) && o < r.scale_offset(slot) + r.scale_bytes());
        if (!mine && cache[b] != before[b]) FAIL_CHECK("byte " << b << " (" << r.describe(o) << ") changed");
      }
      std::vector<float> y(512);
      v41_load_token(r, cache.data(), slot, y.data());
      for (int blk = 0; blk < 512 / r.block(); ++blk) {  // the same values as the block quantizer's own dequant
        const float* xb = x.data() + blk * r.block();
        if (kind == V41Record::Kind::mxfp8_528) {
          std::uint8_t codes[32], sb;
          fp4core::mxfp8_block(xb, codes, &sb, fp4core::Mx8Rule::ref, 255);
          for (int i = 0; i < 32; ++i) CHECK(y[blk * 32 + i] == num::e4m3_to_f32(codes[i]) * std::ldexp(1.0f, sb - 127));
        } else {
          std::uint8_t packed[8], sb;
          fp4core::nvfp4_block(xb, packed, &sb, fp4core::Nv4Rule::ref, {});
          for (int i = 0; i < 16; ++i)
            CHECK(y[blk * 16 + i] == fp4core::e2m1_to_f32(static_cast<std::uint8_t>((packed[i / 2] >> (4 * (i % 2))) & 0xF)) *
                                         num::e4m3_to_f32(sb));
        }
      }
      // and close to x: MXFP8 within 2^-4 relative of the block's scale, NVFP4 within half a step of 6 levels
      double worst = 0;
      for (int d = 0; d < 512; ++d) worst = std::max(worst, std::fabs(static_cast<double>(y[d]) - x[d]));
      CHECK(worst < (kind == V41Record::Kind::mxfp8_528 ? 0.6 : 3.0));
    }
}
