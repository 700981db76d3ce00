// Regression tests of the findings of the in-process fuzz targets (tests/fuzz, scripts/fuzz_farm.sh on the H200's 16
// cores, 2026-12-05): each input reduced to the case edit that triggered it.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "pipeline/catalogue.hpp"
#include "pipeline/check.hpp"
#include "pipeline/golden.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {
// The stage's first selftest case, inputs only.
Case selftest_case(const std::string& stage) {
  const Stage* st = find_stage(stage);
  REQUIRE(st != nullptr);
  REQUIRE(!st->selftest.empty());
  Case c = golden::make_case(st->selftest.front(), 1, 1);
  c.expected.clear();
  return c;
}
}  // namespace

// (The signed overflow of the first finding is caught as such by the ASan + UBSan build of this suite.)
TEST_CASE("fuzz finding: v4.compressor attr coff = INT64_MIN is a validation problem, not a signed overflow (coff * D)") {
  for (const std::int64_t coff : {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()}) {
    Case c = selftest_case("v4.compressor");
    c.attrs["coff"] = AttrValue{coff};
    const auto pr = validate_case(c, false, nullptr);
    REQUIRE(!pr.empty());
    CHECK(pr.front().str().find("attr coff") != std::string::npos);
  }
  for (const char* st : {"v4.compressor", "v4.compressor_cache"}) {
    Case c = selftest_case(st);
    c.attrs["cmp_ratio"] = AttrValue{std::numeric_limits<std::int64_t>::max()};
    const auto pr = validate_case(c, false, nullptr);
    REQUIRE(!pr.empty());
    bool named = false;
    for (const auto& p : pr) named = named || p.str().find("cmp_ratio") != std::string::npos;
    CHECK(named);
  }
}

TEST_CASE("fuzz finding: indexer.logits_paged validates the block table with the cache's page size, not attr page_size's default") {
  Case c = selftest_case("indexer.logits_paged");
  // The cache re-viewed as 16-token pages (4x the pages) and the attr removed: its default (64) is not what the
  // pages hold. The block table (written for 64-token pages) has ceil(L/64) columns where the reference reads
  // ceil(L/16): checked with the default, it passed and the reference read past its row (heap out of bounds).
  Tensor kc = c.input("kv_cache");
  REQUIRE(kc.dim(1) % 16 == 0);
  kc = kc.reshape({kc.dim(0) * (kc.dim(1) / 16), 16, kc.dim(2), kc.dim(3)});
  c.inputs["kv_cache"] = kc;
  c.attrs.erase("page_size");
  const auto pr = validate_case(c, false, nullptr);
  REQUIRE(!pr.empty());
  bool named = false;
  for (const auto& p : pr) named = named || p.str().find("block_table") != std::string::npos;
  CHECK(named);
}
