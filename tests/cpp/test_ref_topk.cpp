// Tests of the indexer.topk reference (spec v32 §5): exact sort on tie-free data, fast path, edge lengths,
// every index base (both directions), forced init/local tokens, NaN/inf ranking, thread invariance, closures
// outliving the case, schema problems.
#include <doctest/doctest.h>

#include "ref_test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda.hpp"
#include "pipeline/backend_diff.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

// Distinct scores: a permutation of 0..C-1 per row, scaled (tie-free by construction).
Case topk_case(std::int64_t R, std::int64_t C, std::int64_t k, const std::vector<std::int32_t>& lens, std::uint32_t seed) {
  Case c;
  c.name = "topk";
  c.stage = "indexer.topk";
  c.attrs["k"] = k;
  Tensor lg(DType::f32, {R, C});
  std::uint32_t x = seed;
  for (std::int64_t r = 0; r < R; ++r) {
    std::vector<int> perm(static_cast<std::size_t>(C));
    for (std::int64_t i = 0; i < C; ++i) perm[static_cast<std::size_t>(i)] = static_cast<int>(i);
    for (std::int64_t i = C - 1; i > 0; --i) {
      x = x * 1664525u + 1013904223u;
      std::swap(perm[static_cast<std::size_t>(i)], perm[(x >> 8) % static_cast<std::uint32_t>(i + 1)]);
    }
    for (std::int64_t i = 0; i < C; ++i) lg.data<float>()[r * C + i] = static_cast<float>(perm[static_cast<std::size_t>(i)]) * 0.25f - 3.0f;
  }
  c.inputs = {{"logits", lg}, {"lengths", Tensor::from_vector(DType::i32, {R}, lens)}};
  return c;
}

Expected run(Case c, int threads = 1) { return test::run_reference(std::move(c), threads); }

std::vector<std::int32_t> row_of(const Tensor& v, std::int64_t r) {
  return {v.data<std::int32_t>() + r * v.dim(1), v.data<std::int32_t>() + (r + 1) * v.dim(1)};
}

// Independent exact top-k: sort (score, position) pairs descending by score with std::sort.
std::vector<std::int64_t> exact_topk(const float* row, std::int64_t len, std::int64_t k) {
  std::vector<std::pair<float, std::int64_t>> v;
  for (std::int64_t p = 0; p < len; ++p) v.emplace_back(row[p], p);
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < std::min(k, len); ++i) out.push_back(v[static_cast<std::size_t>(i)].second);
  return out;
}

}  // namespace

TEST_CASE("ref.topk equals an exact sort on tie-free data - kth - edge lengths 0, 1, k-1, k, k+1, C") {
  const std::int64_t k = 8, C = 40;
  const std::vector<std::int32_t> lens{0, 1, 7, 8, 9, 40, 23};
  for (bool fast : {true, false}) {
    CAPTURE(fast);
    Case c = topk_case(7, C, k, lens, 11);
    c.attrs["fast_path"] = std::int64_t{fast ? 1 : 0};
    const Expected e = run(c);
    const RefTensor* r = e.find("indices");
    REQUIRE(r != nullptr);
    CHECK(r->kind == CompareKind::topk_set);
    CHECK(r->value.dtype() == DType::i32);
    REQUIRE(r->value.shape() == Shape{7, k});
    CHECK(r->topk.k == k);
    CHECK(r->topk.fast_path == fast);
    CHECK(r->topk.len == std::vector<std::int64_t>(lens.begin(), lens.end()));
    const float* lg = c.inputs["logits"].data<float>();
    for (std::int64_t row = 0; row < 7; ++row) {
      CAPTURE(row);
      const std::int64_t len = lens[static_cast<std::size_t>(row)];
      const auto got = row_of(r->value, row);
      const auto want = exact_topk(lg + row * C, len, k);
      std::vector<std::int64_t> expect_row;
      if (fast && len <= k)
        for (std::int64_t p = 0; p < len; ++p) expect_row.push_back(p);  // fast path ignores the scores
      else
        expect_row = want;  // canonical order = descending score
      for (std::int64_t j = 0; j < k; ++j)
        CHECK(got[static_cast<std::size_t>(j)] == (j < static_cast<std::int64_t>(expect_row.size()) ? expect_row[static_cast<std::size_t>(j)] : -1));
      // kth: the min(k, len)-th largest score; -inf for an empty row.
      const double kth = r->topk.kth[static_cast<std::size_t>(row)];
      if (len == 0) CHECK(kth == -kInf);
      else CHECK(kth == static_cast<double>(lg[row * C + want.back()]));
      // scores: the candidates as f64, -inf past the length.
      for (std::int64_t p = 0; p < C; ++p)
        CHECK(r->topk.scores.data<double>()[row * C + p] == (p < len ? static_cast<double>(lg[row * C + p]) : -kInf));
    }
  }
}

TEST_CASE("ref.topk index bases: relative, ragged_offset, absolute, page_slot - to/from round trip") {
  const std::int64_t k = 4, C = 24;
  const std::vector<std::int32_t> lens{10, 3, 20, 0};
  const std::vector<std::int32_t> starts{2, 0, 4, 5};
  const std::vector<std::int32_t> offs{100, 200, 300, 400};
  // page_slot: 2 rows per request, 8-token pages; request 0 pages {5, 2}, request 1 pages {0, 7, 3}.
  const std::vector<std::int32_t> pt{5, 2, -1, 0, 7, 3};
  for (const std::string base : {"relative", "ragged_offset", "absolute", "page_slot"}) {
    CAPTURE(base);
    Case c = topk_case(4, C, k, lens, 3);
    c.attrs["index_base"] = base;
    c.inputs["row_starts"] = Tensor::from_vector(DType::i32, {4}, starts);
    c.inputs["offsets"] = Tensor::from_vector(DType::i32, {4}, offs);
    c.inputs["page_table"] = Tensor::from_vector(DType::i32, {2, 3}, pt);
    c.attrs["page_size"] = std::int64_t{8};
    c.attrs["rows_per_request"] = std::int64_t{2};
    const Tensor logits = c.inputs["logits"];  // keeps the storage alive after the case is reset
    const float* lg = logits.data<float>();
    Expected e = run(c);
    const RefTensor r = *e.find("indices");
    c = Case{};  // closures must not refer to the case
    e = Expected{};
    auto expected_index = [&](std::int64_t row, std::int64_t p) -> std::int64_t {
      if (base == "relative") return p;
      if (base == "ragged_offset") return p + offs[static_cast<std::size_t>(row)];
      if (base == "absolute") return starts[static_cast<std::size_t>(row)] + p;
      return pt[static_cast<std::size_t>((row / 2) * 3 + p / 8)] * 8 + p % 8;
    };
    for (std::int64_t row = 0; row < 4; ++row) {
      CAPTURE(row);
      const std::int64_t len = lens[static_cast<std::size_t>(row)];
      for (std::int64_t p = 0; p < len; ++p) {
        const std::int64_t idx = expected_index(row, p);
        CHECK(r.topk.to_index(row, p) == idx);
        CHECK(r.topk.from_index(row, idx) == p);
      }
      CHECK(r.topk.to_index(row, len) == -1);
      CHECK(r.topk.to_index(row, -1) == -1);
      CHECK(r.topk.from_index(row, -1) == -1);
      if (len > 0 && base != "page_slot") CHECK(r.topk.from_index(row, expected_index(row, len - 1) + 1) == -1);  // one past the row
      // value = the exact top-k positions (read at row_start + p) mapped through the base.
      const auto got = row_of(r.value, row);
      std::vector<std::int64_t> want;
      if (len <= k)
        for (std::int64_t p = 0; p < len; ++p) want.push_back(p);
      else
        want = exact_topk(lg + row * C + starts[static_cast<std::size_t>(row)], len, k);
      for (std::int64_t j = 0; j < k; ++j)
        CHECK(got[static_cast<std::size_t>(j)] == (j < static_cast<std::int64_t>(want.size()) ? expected_index(row, want[static_cast<std::size_t>(j)]) : -1));
    }
    if (base == "page_slot") {
      CHECK(r.topk.from_index(0, 2 * 8 + 1) == 8 + 1);  // page 2 is request 0's block 1
      CHECK(r.topk.from_index(0, 2 * 8 + 2) == -1);     // p 10 = len: not a candidate
      CHECK(r.topk.from_index(0, 7 * 8) == -1);          // page 7 belongs to request 1
      CHECK(r.topk.from_index(2, 3 * 8 + 3) == 19);      // request 1 block 2 offset 3 = p 19 < 20
      CHECK(r.topk.from_index(3, 0) == -1);              // row 3 has no candidates
    }
  }
}

TEST_CASE("ref.topk row_starts: candidates are read from the offset range only") {
  Case c = topk_case(1, 16, 3, {5}, 9);
  float* lg = c.inputs["logits"].data<float>();
  for (int i = 0; i < 16; ++i) lg[i] = (i >= 6 && i < 11) ? static_cast<float>(i) : 1e30f;  // huge outside [6, 11)
  c.inputs["row_starts"] = Tensor::from_vector(DType::i32, {1}, std::vector<std::int32_t>{6});
  SUBCASE("relative") {
    const Expected e = run(c);
    CHECK(row_of(e.find("indices")->value, 0) == std::vector<std::int32_t>{4, 3, 2});
    CHECK(e.find("indices")->topk.kth[0] == 8.0);
  }
  SUBCASE("absolute") {
    c.attrs["index_base"] = std::string("absolute");
    const Expected e = run(c);
    CHECK(row_of(e.find("indices")->value, 0) == std::vector<std::int32_t>{10, 9, 8});
  }
}

TEST_CASE("ref.topk NaN ranks above +inf, ties by lower position - -inf candidates still count") {
  Case c = topk_case(1, 8, 4, {8}, 1);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> v{1.0f, inf, -inf, nan, 2.0f, 2.0f, -0.0f, 0.0f};
  std::copy(v.begin(), v.end(), c.inputs["logits"].data<float>());
  Expected e = run(c);
  CHECK(row_of(e.find("indices")->value, 0) == std::vector<std::int32_t>{3, 1, 4, 5});
  CHECK(e.find("indices")->topk.kth[0] == 2.0);
  c.attrs["k"] = std::int64_t{7};
  e = run(c);
  CHECK(row_of(e.find("indices")->value, 0) == std::vector<std::int32_t>{3, 1, 4, 5, 0, 6, 7});  // -0 == +0: position order
  CHECK(e.find("indices")->topk.kth[0] == 0.0);
  // Two NaN in a row of 3 with k = 2: the k-th largest is NaN.
  Case d = topk_case(1, 3, 2, {3}, 1);
  std::vector<float> w{nan, 5.0f, nan};
  std::copy(w.begin(), w.end(), d.inputs["logits"].data<float>());
  e = run(d);
  CHECK(row_of(e.find("indices")->value, 0) == std::vector<std::int32_t>{0, 2});
  CHECK(std::isnan(e.find("indices")->topk.kth[0]));
}

TEST_CASE("ref.topk forced init and local tokens (+inf) are always selected") {
  Case c = topk_case(2, 64, 6, {64, 30}, 17);
  c.attrs["num_init_tokens"] = std::int64_t{2};
  c.attrs["num_local_tokens"] = std::int64_t{3};
  const Expected e = run(c);
  const RefTensor& r = *e.find("indices");
  for (std::int64_t row = 0; row < 2; ++row) {
    const std::int64_t len = row == 0 ? 64 : 30;
    const auto got = row_of(r.value, row);
    const std::set<std::int32_t> s(got.begin(), got.end());
    for (std::int64_t p : {std::int64_t{0}, std::int64_t{1}, len - 3, len - 2, len - 1}) CHECK(s.count(static_cast<std::int32_t>(p)) == 1);
    CHECK(r.topk.scores.data<double>()[row * 64 + len - 1] == kInf);
    // The sixth pick is the best of the rest.
    const float* lg = c.inputs["logits"].data<float>() + row * 64;
    std::int64_t best = -1;
    for (std::int64_t p = 2; p < len - 3; ++p)
      if (best < 0 || lg[p] > lg[best]) best = p;
    CHECK(s.count(static_cast<std::int32_t>(best)) == 1);
    CHECK(r.topk.kth[static_cast<std::size_t>(row)] == static_cast<double>(lg[best]));
  }
}

TEST_CASE("ref.topk width follows the dumped indices - -1 padding past k") {
  Case c = topk_case(2, 30, 4, {30, 2}, 5);
  c.outputs["indices"] = Tensor(DType::i64, {2, 6});
  const Expected e = run(c);
  const Tensor& v = e.find("indices")->value;
  REQUIRE(v.shape() == Shape{2, 6});
  CHECK(v.data<std::int32_t>()[4] == -1);
  CHECK(v.data<std::int32_t>()[5] == -1);
  CHECK(row_of(v, 1) == std::vector<std::int32_t>{0, 1, -1, -1, -1, -1});
  CHECK(e.find("indices")->describe(7) == "row 1 col 1");
}

TEST_CASE("ref.topk thread invariance: 1, 2 and 16 threads give identical bytes") {
  std::vector<std::int32_t> lens;
  for (int r = 0; r < 33; ++r) lens.push_back((r * 37) % 300);
  Case c = topk_case(33, 300, 16, lens, 23);
  // add ties
  for (int i = 0; i < 33 * 300; i += 3) c.inputs["logits"].data<float>()[i] = 1.0f;
  const Expected a = run(c, 1), b = run(c, 2), d = run(c, 16);
  CHECK(a.find("indices")->value.same_bytes(b.find("indices")->value));
  CHECK(a.find("indices")->value.same_bytes(d.find("indices")->value));
  CHECK(a.find("indices")->topk.kth == d.find("indices")->topk.kth);
}

TEST_CASE("ref.topk schema problems: narrow output, page table gaps and duplicates, missing offsets") {
  auto problems = [](Case c) {
    apply_attr_defaults(c);
    return validate_case(c);
  };
  Case c = topk_case(2, 20, 4, {20, 10}, 1);
  CHECK(problems(c).empty());
  Case n = c;
  n.outputs["indices"] = Tensor(DType::i32, {2, 3});
  CHECK(problems(n).size() == 1);
  Case ro = c;
  ro.attrs["index_base"] = std::string("ragged_offset");
  CHECK(problems(ro).size() == 1);
  Case ps = c;
  ps.attrs["index_base"] = std::string("page_slot");
  ps.attrs["page_size"] = std::int64_t{8};
  ps.inputs["page_table"] = Tensor::from_vector(DType::i32, {2, 3}, std::vector<std::int32_t>{1, 2, 3, 4, 5, -1});
  CHECK(problems(ps).empty());
  ps.inputs["page_table"] = Tensor::from_vector(DType::i32, {2, 3}, std::vector<std::int32_t>{1, 2, 1, 4, 5, -1});
  auto p = problems(ps);
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("distinct pages") != std::string::npos);
  ps.inputs["page_table"] = Tensor::from_vector(DType::i32, {2, 2}, std::vector<std::int32_t>{1, 2, 3, 4});
  CHECK(problems(ps).size() == 1);  // row 0 needs 3 blocks
  ps.inputs["page_table"] = Tensor::from_vector(DType::i32, {1, 3}, std::vector<std::int32_t>{1, 2, 3});
  CHECK(problems(ps).size() == 1);  // 2 rows, 1 request
}

// ---- CUDA backend: the same bytes as the CPU (indices, scores, k-th values, index maps), skipped without a device ----
TEST_CASE("cuda.topk.nan_inf_zeros_ties_dtypes_forced_tokens_fast_path_identical_to_cpu") {
  if (const std::string why = cuda::device_problem(); !why.empty()) {
    MESSAGE("skipped: " << why);
    std::printf("skipped: CPU vs CUDA top-k (%s)\n", why.c_str());
    return;
  }
  std::uint32_t x = 7;
  auto next = [&x] { return x = x * 1664525u + 1013904223u; };
  int n = 0;
  for (DType dt : {DType::f32, DType::bf16, DType::fp16})
    for (int variant = 0; variant < 4; ++variant) {  // fast path on/off x forced tokens off/on
      const std::int64_t R = 7, C = 3000, k = 256;
      const std::vector<std::int32_t> lens{0, 1, 255, 256, 257, 3000, 2000};
      Case c;
      c.name = "t";
      c.stage = "indexer.topk";
      c.attrs["k"] = k;
      c.attrs["fast_path"] = std::int64_t{variant % 2};
      c.attrs["num_init_tokens"] = std::int64_t{variant >= 2 ? 3 : 0};
      c.attrs["num_local_tokens"] = std::int64_t{variant >= 2 ? 5 : 0};
      Tensor lg(dt, {R, C});
      for (std::int64_t i = 0; i < R * C; ++i) {
        const std::uint32_t u = next() >> 8;
        double v = static_cast<double>(u % 64) * 0.125 - 4.0;  // many exact ties
        if (u % 997 == 0) v = std::numeric_limits<double>::quiet_NaN();
        if (u % 991 == 0) v = kInf;
        if (u % 983 == 0) v = -kInf;
        if (u % 977 == 0) v = (u & 1) ? -0.0 : 0.0;
        lg.set_value(i, v);
      }
      c.inputs = {{"logits", lg}, {"lengths", Tensor::from_vector(DType::i32, {R}, lens)}};
      apply_attr_defaults(c);
      REQUIRE(validate_case(c, false).empty());
      const Expected a = run_reference(c, {}, Backend::cpu), b = run_reference(c, {}, Backend::cuda);
      const auto d = pipeline::diff_expected(a, b, "cpu", "cuda");
      INFO(dtype_name(dt) << " variant " << variant << (d.empty() ? "" : ": " + d[0].tensor + ": " + d[0].message));
      CHECK(d.empty());
      ++n;
    }
  CHECK(n == 12);
}
