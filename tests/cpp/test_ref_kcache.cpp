// Tests of the indexer.kcache_store reference and the K-cache decode helpers (spec v32 §3.4): a store into
// shuffled pages checked byte by byte against the layout formula, encode/decode round trip through a block table,
// -1 slots, describe strings, schema problems, thread invariance.
#include <doctest/doctest.h>

#include "ref_test_util.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "layouts/indexer_kcache.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {

Case store_case(std::int64_t T, std::int64_t Dh, std::int64_t P, std::int64_t ps, const std::vector<std::int64_t>& slots,
                std::uint32_t seed) {
  Case c;
  c.name = "kstore";
  c.stage = "indexer.kcache_store";
  c.attrs["page_size"] = ps;
  Tensor k(DType::fp8_e4m3fn, {T, Dh}), s(DType::f32, {T}), cache(DType::u8, {P, ps, 1, Dh + 4});
  std::uint32_t x = seed;
  auto nxt = [&x]() { return x = x * 1664525u + 1013904223u; };
  for (auto& v : k.span<std::uint8_t>()) v = static_cast<std::uint8_t>(nxt() >> 24);
  for (std::int64_t t = 0; t < T; ++t) s.data<float>()[t] = std::ldexp(1.0f, static_cast<int>(nxt() % 20) - 15);
  for (auto& v : cache.span<std::uint8_t>()) v = 0xEE;
  c.inputs = {{"k_fp8", k}, {"k_scale", s}, {"slot_mapping", Tensor::from_vector(DType::i64, {T}, slots)}, {"kv_cache_in", cache}};
  return c;
}

// Token access through the layout, as a reader of the cache would do it (test-side decoding of
// layouts::IndexerKCacheView: by (page, token), by physical slot, by logical position through a block table).
struct Tok {
  std::int64_t page = 0, offset = 0;
  const std::uint8_t* values = nullptr;
  float scale = 0.0f;
};
Tok at(const layouts::IndexerKCacheView& v, std::int64_t page, std::int64_t t) {
  if (page < 0 || page >= v.num_pages || t < 0 || t >= v.layout.page_size) throw std::out_of_range("K cache: outside");
  return {page, t, v.values(page, t), v.scale(page, t)};
}
Tok at_slot(const layouts::IndexerKCacheView& v, std::int64_t slot) {
  if (slot < 0) throw std::out_of_range("K cache: negative slot");
  return at(v, slot / v.layout.page_size, slot % v.layout.page_size);
}
Tok at_logical(const layouts::IndexerKCacheView& v, const std::int32_t* bt, std::int64_t nblocks, std::int64_t j) {
  if (j < 0 || j / v.layout.page_size >= nblocks) throw std::out_of_range("K cache: outside the block table");
  return at(v, bt[j / v.layout.page_size], j % v.layout.page_size);
}

Expected run(Case c, int threads = 1) { return test::run_reference(std::move(c), threads); }

}  // namespace

TEST_CASE("ref.kcache store into shuffled pages, byte by byte") {
  // head_dim 8, 4 tokens per page: page bytes = 4*(8+4) = 48; values at 48p + 8t + d, scales at 48p + 32 + 4t.
  const std::vector<std::int64_t> slots{9, 2, -1, 4, 11};  // (page 2, t 1) (0, 2) skip (1, 0) (2, 3)
  Case c = store_case(5, 8, 3, 4, slots, 7);
  const Expected e = run(c);
  const RefTensor* r = e.find("kv_cache");
  REQUIRE(r != nullptr);
  CHECK(r->kind == CompareKind::bytes);
  std::vector<std::uint8_t> want(3 * 48, 0xEE);
  const auto* k = c.inputs["k_fp8"].data<std::uint8_t>();
  const auto* s = c.inputs["k_scale"].data<float>();
  for (std::size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    const std::int64_t p = slots[t] / 4, o = slots[t] % 4;
    for (int d = 0; d < 8; ++d) want[static_cast<std::size_t>(48 * p + 8 * o + d)] = k[t * 8 + static_cast<std::size_t>(d)];
    std::uint32_t bits;
    std::memcpy(&bits, &s[t], 4);
    for (int b = 0; b < 4; ++b) want[static_cast<std::size_t>(48 * p + 32 + 4 * o + b)] = static_cast<std::uint8_t>(bits >> (8 * b));  // little endian
  }
  REQUIRE(r->value.numel() == 144);
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(r->value.data<std::uint8_t>()[i] == want[i]);
  }
  // The input cache is not modified.
  for (auto v : c.inputs["kv_cache_in"].span<std::uint8_t>()) CHECK(v == 0xEE);
  // describe: value byte of page 2 token 1 dim 3, scale byte 2 of page 0 token 2, an untouched byte.
  CHECK(r->describe(48 * 2 + 8 * 1 + 3) == "page 2 token 1 dim 3 (slot 9, stored from k token 0)");
  CHECK(r->describe(32 + 4 * 2 + 2) == "page 0 token 2 scale byte 2 (slot 2, stored from k token 1)");
  CHECK(r->describe(48 * 1 + 8 * 3) == "page 1 token 3 dim 0 (slot 7, not written by this store: must equal kv_cache_in)");
}

TEST_CASE("ref.kcache round trip through a shuffled block table with -1 slots, and the decode helpers") {
  // 2 requests of 100 and 70 tokens, 64-token pages; physical pages shuffled; every 7th token padded (-1).
  const std::int64_t ps = 64, Dh = 128, P = 6;
  const std::vector<std::vector<std::int32_t>> bt{{4, 1}, {0, 5}};
  const std::vector<std::int64_t> lens{100, 70};
  std::vector<std::int64_t> slots, req, pos;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::int64_t j = 0; j < lens[b]; ++j) {
      const bool pad = (j % 7) == 3;
      slots.push_back(pad ? -1 : bt[b][static_cast<std::size_t>(j / ps)] * ps + j % ps);
      req.push_back(static_cast<std::int64_t>(b));
      pos.push_back(j);
    }
  const auto T = static_cast<std::int64_t>(slots.size());
  Case c = store_case(T, Dh, P, ps, slots, 99);
  const Expected e = run(c, 2);
  const Tensor& cache = e.find("kv_cache")->value;
  const auto view = layouts::IndexerKCacheView::of(cache);
  CHECK(view.num_pages == P);
  CHECK(view.layout.page_size == ps);
  CHECK(view.layout.head_dim == Dh);
  for (std::int64_t t = 0; t < T; ++t) {
    const auto& row = bt[static_cast<std::size_t>(req[static_cast<std::size_t>(t)])];
    const auto tok = at_logical(view, row.data(), 2, pos[static_cast<std::size_t>(t)]);
    CHECK(tok.page == row[static_cast<std::size_t>(pos[static_cast<std::size_t>(t)] / ps)]);
    CHECK(tok.offset == pos[static_cast<std::size_t>(t)] % ps);
    if (slots[static_cast<std::size_t>(t)] < 0) {
      for (std::int64_t d = 0; d < Dh; ++d) CHECK(tok.values[d] == 0xEE);  // padded tokens leave the cache alone
      continue;
    }
    CHECK(std::memcmp(tok.values, c.inputs["k_fp8"].data<std::uint8_t>() + t * Dh, static_cast<std::size_t>(Dh)) == 0);
    CHECK(tok.scale == c.inputs["k_scale"].data<float>()[t]);
    const auto by_slot = at_slot(view, slots[static_cast<std::size_t>(t)]);
    CHECK(by_slot.values == tok.values);
    CHECK(by_slot.scale == tok.scale);
  }
  // Pages 2 and 3 are used by nobody: unchanged.
  for (std::int64_t b = 2 * view.layout.page_bytes(); b < 4 * view.layout.page_bytes(); ++b) CHECK(cache.data<std::uint8_t>()[b] == 0xEE);
  CHECK_THROWS_AS(at_slot(view, P * ps), std::out_of_range);
  CHECK_THROWS_AS(at_logical(view, bt[0].data(), 2, 128), std::out_of_range);
}

TEST_CASE("ref.kcache scale bytes are copied raw (NaN payload) and NaN codes pass through") {
  Case c = store_case(2, 128, 1, 64, {0, 63}, 3);
  c.inputs["k_scale"].data<float>()[1] = num::f32_from_bits(0x7FC00123u);
  c.inputs["k_fp8"].data<std::uint8_t>()[5] = 0x7F;
  const Expected e = run(c);
  const auto view = layouts::IndexerKCacheView::of(e.find("kv_cache")->value);
  CHECK(num::f32_bits(at(view, 0, 63).scale) == 0x7FC00123u);
  CHECK(at(view, 0, 0).values[5] == 0x7F);
}

TEST_CASE("ref.kcache thread invariance: 1, 2 and 16 threads give identical bytes") {
  std::vector<std::int64_t> slots;
  for (std::int64_t t = 0; t < 300; ++t) slots.push_back(t % 5 == 0 ? -1 : (t * 37) % 512);
  Case c = store_case(300, 128, 8, 64, slots, 5);
  const Expected a = run(c, 1), b = run(c, 2), d = run(c, 16);
  CHECK(a.find("kv_cache")->value.same_bytes(b.find("kv_cache")->value));
  CHECK(a.find("kv_cache")->value.same_bytes(d.find("kv_cache")->value));
}

TEST_CASE("ref.kcache schema problems: slot out of range, below -1, duplicated - bad record size") {
  auto problems = [](Case c) {
    apply_attr_defaults(c);
    return validate_case(c);
  };
  CHECK(problems(store_case(3, 128, 2, 64, {0, 127, -1}, 1)).empty());
  auto p = problems(store_case(3, 128, 2, 64, {0, 128, -1}, 1));
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("token 1: 128") != std::string::npos);
  CHECK(problems(store_case(3, 128, 2, 64, {0, -2, 1}, 1)).size() == 1);
  p = problems(store_case(3, 128, 2, 64, {5, 6, 5}, 1));
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("tokens 0 and 2 both store into slot 5") != std::string::npos);
  Case bad = store_case(2, 128, 1, 64, {0, 1}, 1);
  bad.inputs["kv_cache_in"] = Tensor(DType::u8, {1, 64, 1, 128});
  CHECK(!problems(bad).empty());
}
