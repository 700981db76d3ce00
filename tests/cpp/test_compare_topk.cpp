// Tie-aware top-k comparator: band logic (ties, equal values at tau, all-equal rows, -inf rows, rows shorter than k,
// NaN) and every structural rule. The TopkRef is built by hand: one row per test, relative index base unless said.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

using namespace dsa;
using namespace dsa::cmp;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

// One-row reference over `scores` (all candidates valid), k, index = p + base. kth computed here by sorting.
RefTensor ref_row(std::vector<double> scores, std::int64_t k, std::vector<std::int32_t> ref_idx, std::int64_t base = 0,
                  std::int64_t width = -1) {
  RefTensor r;
  r.name = "indices";
  r.kind = CompareKind::topk_set;
  const auto L = static_cast<std::int64_t>(scores.size());
  const std::int64_t W = width < 0 ? k : width;
  ref_idx.resize(static_cast<std::size_t>(W), -1);
  r.value = Tensor::from_vector(DType::i32, {1, W}, ref_idx);
  r.topk.k = k;
  r.topk.len = {L};
  r.topk.scores = Tensor::from_vector(DType::f64, {1, std::max<std::int64_t>(L, 1)}, L ? scores : std::vector<double>{-kInf});
  std::vector<double> s = scores;
  for (auto& x : s)
    if (std::isnan(x)) x = kInf;
  std::sort(s.begin(), s.end(), std::greater<>());
  r.topk.kth = {L == 0 ? -kInf : s[static_cast<std::size_t>(std::min(k, L) - 1)]};
  r.topk.to_index = [base, L](std::int64_t, std::int64_t p) { return p >= 0 && p < L ? p + base : -1; };
  r.topk.from_index = [base, L](std::int64_t, std::int64_t i) { return i - base >= 0 && i - base < L ? i - base : -1; };
  return r;
}
Tensor idx(std::vector<std::int32_t> v) { return Tensor::from_vector(DType::i32, {1, static_cast<std::int64_t>(v.size())}, v); }
const Tolerance kExact{"exact-ties", 0.0, 0.0};
}  // namespace

TEST_CASE("compare_topk: ties at tau are a band, clear winners and losers are not") {
  // scores 5 4 3 3 3 1, k = 3: tau = 3; 5 and 4 must be in, the three 3s are the band, 1 must be out.
  const RefTensor r = ref_row({5, 4, 3, 3, 3, 1}, 3, {0, 1, 2});
  const TopkRow tr = topk_row(r.topk, 0, kExact);
  CHECK(tr.tau == 3);
  CHECK(tr.cls == std::vector<Band>{Band::must, Band::must, Band::band, Band::band, Band::band, Band::must_not});

  CheckResult c = compare_topk(idx({0, 1, 2}), r, kExact);
  CHECK(c.verdict == Verdict::BITEXACT);
  c = compare_topk(idx({4, 0, 1}), r, kExact);  // tie swap + different order
  CHECK(c.verdict == Verdict::WITHIN_BOUND);
  CHECK(c.topk->swaps == 1);
  CHECK(c.topk->band == 3);
  CHECK(c.topk->recall == doctest::Approx(2.0 / 3.0));
  CHECK(c.topk->jaccard == doctest::Approx(0.5));  // |{0,1}| / |{0,1,2,4}|
  c = compare_topk(idx({1, 0, 2}), r, kExact);  // same set, order differs
  CHECK(c.verdict == Verdict::WITHIN_BOUND);
  CHECK(c.topk->swaps == 0);
  c = compare_topk(idx({0, 1, 5}), r, kExact);  // the loser selected
  CHECK(c.verdict == Verdict::FAIL);
  CHECK(c.topk->hard_extras == 1);
  CHECK(c.topk->hard_misses == 0);
  c = compare_topk(idx({0, 2, 3}), r, kExact);  // a winner missing
  CHECK(c.verdict == Verdict::FAIL);
  CHECK(c.topk->hard_misses == 1);
  CHECK(c.message.find("missing index 1") != std::string::npos);
}

TEST_CASE("compare_topk: values near tau within the bound are swappable") {
  // k = 2, tau = 3.0001; with atol 1e-3: 3.0001, 3, 2.9999 are all in the band (|diff| <= 2e-3).
  const RefTensor r = ref_row({5, 3.0001, 3, 2.9999, 1}, 2, {0, 1});
  CHECK(compare_topk(idx({3, 0}), r, Tolerance{"", 0, 1e-3}).verdict == Verdict::WITHIN_BOUND);
  CHECK(compare_topk(idx({3, 0}), r, kExact).verdict == Verdict::FAIL);  // exact ties only
  // rtol scales the band: 1e-4 * 3 * 2 = 6e-4 covers 3.0001 vs 2.9999 (2e-4 apart).
  CHECK(compare_topk(idx({3, 0}), r, Tolerance{"", 1e-4, 0}).verdict == Verdict::WITHIN_BOUND);
  // Per-candidate bounds from the reference override the profile.
  RefTensor rb = r;
  rb.topk.bounds = Tensor::from_vector(DType::f64, {1, 5}, std::vector<double>{0, 0, 0, 0, 0});
  CHECK(compare_topk(idx({3, 0}), rb, Tolerance{"", 0, 1e-3}).verdict == Verdict::FAIL);
}

TEST_CASE("compare_topk: all-equal rows, -inf rows, NaN ranks first") {
  const RefTensor eq = ref_row({2, 2, 2, 2, 2}, 2, {0, 1});
  CHECK(compare_topk(idx({4, 2}), eq, kExact).verdict == Verdict::WITHIN_BOUND);
  CHECK(!finding_positional_topk(idx({0, 1}), eq));  // positional is a legal choice here

  const RefTensor ni = ref_row({-kInf, -kInf, -kInf, -kInf, -kInf, 1.0}, 3, {5, 0, 1});
  CHECK(topk_row(ni.topk, 0, kExact).tau == -kInf);
  CHECK(compare_topk(idx({5, 3, 4}), ni, kExact).verdict == Verdict::WITHIN_BOUND);
  CHECK(compare_topk(idx({0, 1, 2}), ni, kExact).verdict == Verdict::FAIL);  // the finite one is missing

  const double nan = std::numeric_limits<double>::quiet_NaN();
  const RefTensor rn = ref_row({1, nan, 2}, 1, {1});
  CHECK(compare_topk(idx({1}), rn, kExact).verdict == Verdict::BITEXACT);
  CHECK(compare_topk(idx({2}), rn, kExact).verdict == Verdict::FAIL);
}

TEST_CASE("compare_topk: rows shorter than k, fast path and -1 padding") {
  const RefTensor r = ref_row({0.5, 0.9}, 4, {0, 1});
  CHECK(compare_topk(idx({0, 1, -1, -1}), r, kExact).verdict == Verdict::BITEXACT);
  CheckResult c = compare_topk(idx({1, 0, -1, -1}), r, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);  // fast path must be [0..len-1] in order
  CHECK(c.message.find("fast path") != std::string::npos);
  CHECK(compare_topk(idx({0, 1, 0, -1}), r, kExact).verdict == Verdict::STRUCTURE);   // padding missing
  CHECK(compare_topk(idx({0, -1, -1, -1}), r, kExact).verdict == Verdict::STRUCTURE); // too few
  CHECK(compare_topk(idx({-1, 0, 1, -1}), r, kExact).verdict == Verdict::STRUCTURE);  // -1 not trailing
  RefTensor nf = r;
  nf.topk.fast_path = false;
  CHECK(compare_topk(idx({1, 0, -1, -1}), nf, kExact).verdict == Verdict::WITHIN_BOUND);

  const RefTensor empty = ref_row({}, 2, {});
  CHECK(compare_topk(idx({-1, -1}), empty, kExact).verdict == Verdict::BITEXACT);
  CHECK(compare_topk(idx({0, -1}), empty, kExact).verdict == Verdict::STRUCTURE);
}

TEST_CASE("compare_topk: range, duplicates, index base hints, sort order") {
  const RefTensor r = ref_row({6, 5, 4, 3, 2, 1}, 3, {0, 1, 2});
  CheckResult c = compare_topk(idx({0, 1, 6}), r, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("not a candidate") != std::string::npos);
  CHECK(compare_topk(idx({0, 1, -5}), r, kExact).verdict == Verdict::STRUCTURE);
  c = compare_topk(idx({0, 0, 1}), r, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("duplicate index 0") != std::string::npos);

  const RefTensor ab = ref_row({6, 5, 4, 3, 2, 1}, 3, {100, 101, 102}, 100);  // absolute: start 100
  CHECK(compare_topk(idx({102, 100, 101}), ab, kExact).verdict == Verdict::WITHIN_BOUND);
  c = compare_topk(idx({0, 1, 2}), ab, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("relative positions") != std::string::npos);
  c = compare_topk(idx({101, 102, 106}), ab, kExact);  // 1-based
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("index base +1") != std::string::npos);

  RefTensor so = r;
  so.topk.sorted = true;
  CHECK(compare_topk(idx({0, 1, 2}), so, kExact).verdict == Verdict::BITEXACT);
  c = compare_topk(idx({2, 1, 0}), so, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("descending") != std::string::npos);

  // Wider output than k: extra columns must be -1.
  const RefTensor wide = ref_row({6, 5, 4, 3, 2, 1}, 2, {0, 1}, 0, 4);
  CHECK(compare_topk(idx({1, 0, -1, -1}), wide, kExact).verdict == Verdict::WITHIN_BOUND);
  CHECK(compare_topk(idx({1, 0, 2, -1}), wide, kExact).verdict == Verdict::STRUCTURE);
}

TEST_CASE("compare_topk: B22 positional prefix is flagged only when the scores forbid it") {
  const RefTensor r = ref_row({1, 2, 3, 4, 5, 6}, 3, {5, 4, 3});
  const auto f = finding_positional_topk(idx({0, 1, 2}), r);
  REQUIRE(f);
  CHECK(f->find("B22") != std::string::npos);
  CHECK(!finding_positional_topk(idx({5, 4, 3}), r));
}

TEST_CASE("compare_topk: sorted rows check the set before the order, with the index-base hint") {
  RefTensor r = ref_row({9, 8, 7, 6, 5, 4, 3, 2}, 3, {0, 1, 2});
  r.topk.sorted = true;
  // Every index +1: still candidates of the row, in descending order, but index 3 is a clear loser.
  const CheckResult plus1 = compare_topk(idx({1, 2, 3}), r, kExact);
  CHECK(plus1.verdict == Verdict::FAIL);
  CHECK(plus1.message.find("hint: every pick the reference does not make is one past a reference pick (index base +1?)") !=
        std::string::npos);
  CHECK(plus1.message.find("descending") == std::string::npos);
  // The right set in the wrong order is an order problem.
  const CheckResult order = compare_topk(idx({1, 0, 2}), r, kExact);
  CHECK(order.verdict == Verdict::STRUCTURE);
  CHECK(order.message.find("not in descending score order at pos 1") != std::string::npos);
  // Locations of top-k findings carry no element values.
  REQUIRE(order.first);
  CHECK(detail::loc_str(*order.first).find("(out") == std::string::npos);
}

TEST_CASE("compare_topk: sorted=1 leaves fast-path rows in their positional order (fuzz finding, tests/fuzz/fuzz_topk.cpp)") {
  // len 2 <= k 12 with fast_path: the reference emits [0, 1] whatever the scores (6.375 < inf); sorted=1 must not
  // call that order wrong. The same row without the fast path must be sorted.
  RefTensor r = ref_row({6.375, kInf}, 12, {0, 1});
  r.topk.sorted = true;
  r.topk.fast_path = true;
  CHECK(compare_topk(idx({0, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}), r, kExact).verdict == Verdict::BITEXACT);
  r.topk.fast_path = false;
  const CheckResult c = compare_topk(idx({0, 1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}), r, kExact);
  CHECK(c.verdict == Verdict::STRUCTURE);
  CHECK(c.message.find("not in descending score order at pos 1") != std::string::npos);
  CHECK(compare_topk(idx({1, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}), r, kExact).verdict == Verdict::WITHIN_BOUND);
}
