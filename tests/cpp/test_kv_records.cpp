// The KV record layouts (layouts/kv_records.hpp): byte positions in both orders, describe(), the page rule, the
// 352-byte record's scale interleave, and a store / load round trip that touches exactly the token's bytes and
// dequantizes to the block quantizers' values.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "layouts/kv_records.hpp"
#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"

using namespace dsa;
using namespace dsa::layouts;

namespace {
const RecordFormat& fmt(const char* n) {
  const RecordFormat* f = find_record(n);
  REQUIRE(f != nullptr);
  return *f;
}
}  // namespace

TEST_CASE("kv records: sizes and regions add up for every record") {
  const std::vector<std::pair<const char*, int>> want{{"v41_mxfp8_528", 528}, {"v41_nvfp4_288", 288}, {"sglang_mxfp4_368", 368},
                                                      {"flashmla_nvfp4_352", 352}, {"nvfp4_384", 384}, {"nvfp4_432", 432},
                                                      {"v41_idx_mxfp4_68", 68}, {"v41_idx_fp8_132", 132}, {"nvfp4_432_v4", 432}};
  CHECK(record_formats().size() == want.size());
  for (const auto& [n, bytes] : want) {
    const RecordFormat& f = fmt(n);
    CAPTURE(n);
    CHECK(f.record_bytes() == bytes);
    CHECK(f.regions[static_cast<std::size_t>(f.region_index(RegionKind::codes))].bytes == f.code_bytes());
    CHECK(f.regions[static_cast<std::size_t>(f.region_index(RegionKind::scales))].bytes >= f.nscales() * f.scale_bytes());
    if (f.rope_store != RopeStore::quantized)
      CHECK(f.regions[static_cast<std::size_t>(f.region_index(RegionKind::rope))].bytes == f.rope_bytes());
    else
      CHECK(f.region_index(RegionKind::rope) == -1);
  }
  CHECK(find_record("v41_mxfp8_529") == nullptr);
}

TEST_CASE("kv records: offsets of page 1 token 3 in both orders, and the 512-byte page rule") {
  KvRecord m{&fmt("v41_mxfp8_528"), RecordOrder::page_segregated, 32};
  CHECK(m.region_offset(35, 0) == 528 * 32 + 3 * 512);
  CHECK(m.region_offset(35, 1) == 528 * 32 + 512 * 32 + 3 * 16);
  CHECK(m.page_problem().empty());
  m.order = RecordOrder::token_interleaved;
  CHECK(m.region_offset(35, 0) == 35 * 528);
  CHECK(m.region_offset(35, 1) == 35 * 528 + 512);
  m.page_size = 16;  // 8448 bytes: not a multiple of 512
  CHECK(m.page_problem().find("multiple of 32") != std::string::npos);
  KvRecord n{&fmt("v41_nvfp4_288"), RecordOrder::page_segregated, 64};
  CHECK(n.region_offset(67, 0) == 288 * 64 + 3 * 256);
  CHECK(n.region_offset(67, 1) == 288 * 64 + 256 * 64 + 3 * 32);
  CHECK(n.page_problem().empty());
  n.page_size = 8;
  CHECK(n.page_problem().find("multiple of 16") != std::string::npos);
  // one part: page_segregated is token_interleaved
  const KvRecord s{&fmt("sglang_mxfp4_368"), RecordOrder::page_segregated, 64};
  CHECK(s.region_offset(64 + 5, 3) == (64 + 5) * 368 + 240);
  CHECK(s.page_problem().empty());
  // two parts (FlashInfer's 384): per page P data rows [224 codes | 128 rope], then P scale rows [28 scales | 4 pad]
  const KvRecord f{&fmt("nvfp4_384"), RecordOrder::page_segregated, 64};
  CHECK(f.region_offset(64 + 5, 0) == 384 * 64 + 5 * 352);
  CHECK(f.region_offset(64 + 5, 1) == 384 * 64 + 5 * 352 + 224);
  CHECK(f.region_offset(64 + 5, 2) == 384 * 64 + 352 * 64 + 5 * 32);
  CHECK(f.region_offset(64 + 5, 3) == 384 * 64 + 352 * 64 + 5 * 32 + 28);
  CHECK(f.slot_of(384 * 64 + 352 * 64 + 5 * 32 + 30) == 64 + 5);
  CHECK(f.slot_of(384 * 64 + 5 * 352 + 300) == 64 + 5);
  CHECK(parse_record_order("token_interleaved") == RecordOrder::token_interleaved);
  CHECK(!parse_record_order("interleaved"));
}

TEST_CASE("kv records: the 352-byte record stores scale s at byte 8*(s&3)+(s>>2), a permutation") {
  const RecordFormat& f = fmt("flashmla_nvfp4_352");
  std::set<int> pos;
  for (int s = 0; s < 32; ++s) {
    pos.insert(f.scale_pos(s));
    CHECK(f.scale_of_pos(f.scale_pos(s)) == s);
  }
  CHECK(pos.size() == 32);
  CHECK(*pos.rbegin() == 31);
  CHECK(f.scale_pos(1) == 8);
  CHECK(f.scale_pos(4) == 1);
  const RecordFormat& g = fmt("nvfp4_384");
  CHECK(g.scale_of_pos(27) == 27);
  CHECK(g.scale_of_pos(28) == -1);
}

TEST_CASE("kv records: describe names page, token, dim, scale, rope or pad") {
  const KvRecord m{&fmt("v41_mxfp8_528"), RecordOrder::page_segregated, 32};
  CHECK(m.describe(m.region_offset(35, 0) + 40) == "page 1 token 3 dim 40 (e4m3 code, scale 1)");
  CHECK(m.describe(m.region_offset(35, 1) + 5) == "page 1 token 3 scale 5 (ue8m0, dims 160..191)");
  CHECK(m.slot_of(m.region_offset(35, 1) + 5) == 35);
  const KvRecord n{&fmt("v41_nvfp4_288"), RecordOrder::token_interleaved, 64};
  CHECK(n.describe(n.region_offset(67, 0) + 3) == "page 1 token 3 dims 6,7 (e2m1 nibbles, scale 0)");
  CHECK(n.describe(n.region_offset(67, 1) + 31) == "page 1 token 3 scale 31 (e4m3, dims 496..511)");
  const KvRecord s{&fmt("sglang_mxfp4_368"), RecordOrder::token_interleaved, 64};
  CHECK(s.describe(s.region_offset(2, 2) + 1) == "page 0 token 2 pad byte 1");
  CHECK(s.describe(s.region_offset(2, 3) + 3) == "page 0 token 2 rope dim 1 byte 1 (bf16) = dim 449");
  const KvRecord p{&fmt("flashmla_nvfp4_352"), RecordOrder::page_segregated, 64};
  CHECK(p.describe(p.region_offset(9, 2) + 8) == "page 0 token 9 scale 1 (e4m3, dims 16..31)");
  CHECK(p.describe(p.region_offset(9, 1) + 2) == "page 0 token 9 rope dim 2 (e4m3, unscaled) = dim 514");
  CHECK(p.slot_of(p.region_offset(9, 1) + 2) == 9);
  const KvRecord q{&fmt("nvfp4_384"), RecordOrder::page_segregated, 64};
  CHECK(q.describe(q.region_offset(7, 3) + 2) == "page 0 token 7 pad byte 2");
  CHECK(q.describe(q.region_offset(7, 2) + 27) == "page 0 token 7 scale 27 (e4m3, dims 432..447)");
  CHECK(q.describe(q.region_offset(7, 1) + 1) == "page 0 token 7 rope dim 0 byte 1 (bf16) = dim 448");
  const KvRecord i8{&fmt("v41_idx_fp8_132"), RecordOrder::page_segregated, 128};
  CHECK(i8.region_offset(130, 1) == 132 * 128 + 128 * 128 + 2 * 4);
  CHECK(i8.describe(i8.region_offset(130, 1) + 3) == "page 1 token 2 scale 0 byte 3 (fp32 2^e, dims 0..127)");
  CHECK(i8.describe(i8.region_offset(130, 0) + 100) == "page 1 token 2 dim 100 (e4m3 code, scale 0)");
  CHECK(i8.page_problem().empty());
  // DeepGEMM's FP4 sparse logits need 512-byte page strides (128-slot MXFP4 pages); the FP8 option's planar pages
  // (V3.2's, 64 slots) have no such rule.
  CHECK(KvRecord{&fmt("v41_idx_fp8_132"), RecordOrder::page_segregated, 64}.page_problem().empty());
  CHECK(KvRecord{&fmt("v41_idx_mxfp4_68"), RecordOrder::page_segregated, 64}.page_problem().find("multiple of 128") != std::string::npos);
}

TEST_CASE("kv records: store writes only the token's bytes, load gives the exact dequantized values") {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const RecordFormat& f : record_formats())
    for (auto order : {RecordOrder::page_segregated, RecordOrder::token_interleaved}) {
      CAPTURE(f.name);
      CAPTURE(static_cast<int>(order));
      const KvRecord r{&f, order, 32};
      std::vector<std::uint8_t> cache(static_cast<std::size_t>(r.page_bytes() * 3), 0xA5), before = cache;
      std::vector<float> x(static_cast<std::size_t>(f.dim()));
      for (auto& v : x) v = num::round_to_bf16(nd(rng) * 3.0f);
      const std::int64_t slot = 32 + 17;
      const RecordQuant qo = producer_quant(f);
      store_record(r, x.data(), slot, cache.data(), qo);
      for (std::size_t b = 0; b < cache.size(); ++b) {
        const auto o = static_cast<std::int64_t>(b);
        bool mine = false;
        for (int i = 0; i < f.nregions; ++i)
          mine |= o >= r.region_offset(slot, i) && o < r.region_offset(slot, i) + f.regions[static_cast<std::size_t>(i)].bytes;
        if (!mine && cache[b] != before[b]) FAIL_CHECK("byte " << b << " (" << r.describe(o) << ") changed");
        if (mine) CHECK(r.slot_of(o) == slot);
        if (mine && f.pad_untouched && r.describe(o).find("pad byte") != std::string::npos) CHECK(cache[b] == before[b]);
      }
      std::vector<float> y(static_cast<std::size_t>(f.dim()));
      load_record(r, cache.data(), slot, y.data());
      for (int blk = 0; blk < f.nscales(); ++blk) {  // the same values as the block quantizer's own dequant
        const float* xb = x.data() + blk * f.block();
        std::uint8_t codes[128], sb;
        if (f.codec == RecCodec::fp8) {  // one fp32 2^e per 128 dims, the MXFP8 rule's exponent
          fp4core::mxfp8_block(xb, codes, &sb, qo.mx8, 255, 128);
          for (int i = 0; i < 128; ++i) CHECK(y[static_cast<std::size_t>(blk * 128 + i)] == num::e4m3_to_f32(codes[i]) * std::ldexp(1.0f, sb - 127));
        } else if (f.codec == RecCodec::mxfp8) {
          fp4core::mxfp8_block(xb, codes, &sb, qo.mx8, qo.byte_max);
          for (int i = 0; i < 32; ++i) CHECK(y[static_cast<std::size_t>(blk * 32 + i)] == num::e4m3_to_f32(codes[i]) * std::ldexp(1.0f, sb - 127));
        } else {
          if (f.codec == RecCodec::nvfp4) fp4core::nvfp4_block(xb, codes, &sb, qo.nv4, qo.e2m1);
          else fp4core::mxfp4_block(xb, codes, &sb, qo.mx4, qo.e2m1);
          const float s = f.codec == RecCodec::nvfp4 ? num::e4m3_to_f32(sb) : std::ldexp(1.0f, sb - 127);
          for (int i = 0; i < f.block(); ++i)
            if (f.rope_store != RopeStore::both || blk * f.block() + i < f.nope)  // `both`: load gives the RoPE copy
            CHECK(y[static_cast<std::size_t>(blk * f.block() + i)] ==
                  fp4core::e2m1_to_f32(static_cast<std::uint8_t>((codes[i / 2] >> (4 * (i % 2))) & 0xF)) * s);
        }
      }
      for (int d = f.rope_store == RopeStore::both ? f.nope : f.qdims(); d < f.dim(); ++d)  // rope beside the codes: bf16 exact, e4m3 one rounding
        CHECK(y[static_cast<std::size_t>(d)] == (f.rope_bf16() ? x[static_cast<std::size_t>(d)]
                                                                                 : num::e4m3_to_f32(fp8core::f32_to_e4m3(x[static_cast<std::size_t>(d)]))));
      // and close to x: MXFP8 within 2^-4 relative of the block's scale, the fp4 codecs within a step of 6 levels
      double worst = 0;
      for (int d = 0; d < f.dim(); ++d) worst = std::max(worst, std::fabs(static_cast<double>(y[static_cast<std::size_t>(d)]) - x[static_cast<std::size_t>(d)]));
      CHECK(worst < (f.fp4() ? 4.0 : 0.6));
    }
}

TEST_CASE("kv records: the FP8 option's fp32 scale is 2^e, +inf for an inf block, NaN for a NaN block") {
  const KvRecord r{&fmt("v41_idx_fp8_132"), RecordOrder::page_segregated, 128};
  std::vector<std::uint8_t> cache(static_cast<std::size_t>(r.page_bytes()), 0);
  auto scale_of = [&](std::int64_t slot) {
    float s;
    std::memcpy(&s, cache.data() + r.region_offset(slot, 1), 4);
    return s;
  };
  std::vector<float> x(128, 0.0f);
  x[5] = 448.0f * 8.0f;  // amax 448 * 2^3: e = 3 exactly
  store_record(r, x.data(), 0, cache.data(), producer_quant(r.f[0]));
  CHECK(scale_of(0) == 8.0f);
  CHECK(cache[static_cast<std::size_t>(r.region_offset(0, 0) + 5)] == 0x7E);  // 448
  x[5] = 0.0f;  // all zero: the amax floor 1e-4 gives 2^ceil(log2(1e-4 / 448)) = 2^-22
  store_record(r, x.data(), 1, cache.data(), producer_quant(r.f[0]));
  CHECK(scale_of(1) == std::ldexp(1.0f, -22));
  x[7] = INFINITY;
  store_record(r, x.data(), 2, cache.data(), producer_quant(r.f[0]));
  CHECK(std::isinf(scale_of(2)));
  x[8] = NAN;
  store_record(r, x.data(), 3, cache.data(), producer_quant(r.f[0]));
  CHECK(std::isnan(scale_of(3)));
}
