// tensor.*: construction, shared-storage views (slice0/row/reshape/view_as), clone, bounds and overflow checks,
// value decode / set_value rounding, Case attr accessors and Problem messages.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tensor/case.hpp"
#include "tensor/tensor.hpp"

using namespace dsa;

TEST_CASE("tensor.construct zeros - shape - dims - numel - bytes") {
  Tensor t(DType::bf16, {2, 3, 4});
  CHECK(t.defined());
  CHECK(t.rank() == 3);
  CHECK(t.numel() == 24);
  CHECK(t.nbytes() == 48);
  CHECK(t.dim(0) == 2);
  CHECK(t.dim(-1) == 4);
  CHECK(t.dim(-3) == 2);
  CHECK_THROWS_AS(t.dim(3), std::out_of_range);
  CHECK_THROWS_AS(t.dim(-4), std::out_of_range);
  for (auto v : t.span<std::uint16_t>()) CHECK(v == 0);
  CHECK(shape_str(t.shape()) == "[2, 3, 4]");
  Tensor s(DType::f32, {});  // rank 0 = one element
  CHECK(s.numel() == 1);
  CHECK(s.rank() == 0);
  Tensor e(DType::i32, {0, 5});
  CHECK(e.empty());
  CHECK(e.nbytes() == 0);
  Tensor d;
  CHECK_FALSE(d.defined());
  CHECK(d.raw() == nullptr);
}

TEST_CASE("tensor.checked_numel rejects overflow and negative dims") {
  CHECK(checked_numel({}) == 1);
  CHECK(checked_numel({0, std::numeric_limits<std::int64_t>::max()}) == 0);
  CHECK(checked_numel({std::int64_t{1} << 31, std::int64_t{1} << 31}) == std::int64_t{1} << 62);
  CHECK_THROWS_AS(checked_numel({std::int64_t{1} << 32, std::int64_t{1} << 32}), std::overflow_error);
  CHECK_THROWS_AS(checked_numel({3, std::numeric_limits<std::int64_t>::max() / 2}), std::overflow_error);
  CHECK_THROWS_AS(checked_numel({-1, 4}), std::overflow_error);
  CHECK_THROWS_AS(Tensor(DType::f64, {std::int64_t{1} << 61, 2}), std::overflow_error);  // bytes overflow
  CHECK_THROWS_AS(Tensor(DType::u8, {-2}), std::overflow_error);
}

TEST_CASE("tensor.typed access checks the element size in every build") {
  Tensor t(DType::fp8_e4m3fn, {4});
  CHECK_NOTHROW(t.data<std::uint8_t>());
  CHECK_THROWS_AS(t.data<std::uint16_t>(), std::logic_error);
  CHECK_THROWS_AS(t.data<float>(), std::logic_error);
  const Tensor& c = t;
  CHECK_THROWS_AS(c.span<std::int32_t>(), std::logic_error);
  CHECK_THROWS_AS(Tensor::from_vector(DType::f32, {3}, std::vector<float>{1, 2}), std::invalid_argument);
  CHECK_THROWS_AS(Tensor::from_vector(DType::f32, {2}, std::vector<double>{1, 2}), std::invalid_argument);
}

TEST_CASE("tensor.at / flat index and debug-only bounds") {
  auto t = Tensor::from_vector(DType::i32, {2, 3}, std::vector<std::int32_t>{0, 1, 2, 10, 11, 12});
  CHECK(t.flat({1, 2}) == 5);
  CHECK(t.at<std::int32_t>({1, 0}) == 10);
  t.at<std::int32_t>({0, 1}) = 7;
  CHECK(t.data<std::int32_t>()[1] == 7);
#ifndef NDEBUG
  // Debug builds (the ASan run) check indices; release builds do not pay for it.
  CHECK_THROWS_AS(t.flat({2, 0}), std::out_of_range);
  CHECK_THROWS_AS(t.flat({0, -1}), std::out_of_range);
  CHECK_THROWS_AS(t.flat({0}), std::out_of_range);
  CHECK_THROWS_AS(t.bits(6), std::out_of_range);
  CHECK_THROWS_AS(t.set_value(-1, 0.0), std::out_of_range);
#endif
}

TEST_CASE("tensor.slice0 - row and reshape share storage - clone does not") {
  std::vector<float> v(24);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  const auto t = Tensor::from_vector(DType::f32, {4, 3, 2}, v);
  Tensor s = t.slice0(1, 3);
  CHECK(s.shape() == Shape{2, 3, 2});
  CHECK(s.numel() == 12);
  CHECK(s.data<float>()[0] == 6.0f);
  CHECK(s.value(11) == 17.0);
  Tensor r = t.row(3);
  CHECK(r.shape() == Shape{3, 2});
  CHECK(r.data<float>()[5] == 23.0f);
  Tensor rr = r.row(1);  // a view of a view
  CHECK(rr.shape() == Shape{2});
  CHECK(rr.data<float>()[0] == 20.0f);
  Tensor m = t.reshape({6, 4});
  CHECK(m.at<float>({5, 3}) == 23.0f);
  CHECK(t.slice0(4, 4).numel() == 0);
  CHECK(t.slice0(0, 0).shape() == Shape{0, 3, 2});
  // Writes through a view are seen by every alias; a clone is independent.
  Tensor c = t.clone();
  s.data<float>()[0] = -1.0f;
  CHECK(t.data<float>()[6] == -1.0f);
  CHECK(m.data<float>()[6] == -1.0f);
  CHECK(c.data<float>()[6] == 6.0f);
  Tensor sc = s.clone();  // clone of an offset view copies just the view
  CHECK(sc.shape() == s.shape());
  CHECK(sc.same_bytes(s));
  CHECK_FALSE(sc.same_bytes(t));
  CHECK(sc.data<float>()[0] == -1.0f);
  // Bounds and shape checks are exceptions in every build.
  CHECK_THROWS_AS(t.slice0(3, 5), std::out_of_range);
  CHECK_THROWS_AS(t.slice0(-1, 2), std::out_of_range);
  CHECK_THROWS_AS(t.slice0(2, 1), std::out_of_range);
  CHECK_THROWS_AS(t.row(4), std::out_of_range);
  CHECK_THROWS_AS(Tensor(DType::f32, {}).slice0(0, 1), std::out_of_range);
  CHECK_THROWS_AS(t.reshape({5, 5}), std::invalid_argument);
  CHECK_THROWS_AS(t.reshape({-24}), std::overflow_error);
  CHECK(t.reshape({24}).rank() == 1);
}

TEST_CASE("tensor.view_as reinterprets bits of the same size only") {
  auto t = Tensor::from_vector(DType::u16, {2}, std::vector<std::uint16_t>{0x3F80, 0xC000});
  Tensor b = t.view_as(DType::bf16);
  CHECK(b.dtype() == DType::bf16);
  CHECK(b.value(0) == 1.0);
  CHECK(b.value(1) == -2.0);
  CHECK(t.view_as(DType::fp16).value(0) == std::ldexp(1.0, 0) * 1.875);  // 0x3F80 as fp16 = 1.875
  CHECK_THROWS_AS(t.view_as(DType::f32), std::invalid_argument);
  CHECK_THROWS_AS(t.view_as(DType::fp8_e4m3fn), std::invalid_argument);
}

TEST_CASE("tensor.set_value rounds once (RNE) for float dtypes - full() broadcasts bits") {
  Tensor b(DType::bf16, {3});
  b.set_value(0, 1.0 + std::ldexp(1.0, -8));                        // tie -> even 1.0
  b.set_value(1, 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30));  // above the tie -> 1 + 2^-7
  b.set_value(2, -0.0);
  CHECK(b.bits(0) == 0x3F80);
  CHECK(b.bits(1) == 0x3F81);
  CHECK(b.bits(2) == 0x8000);
  Tensor q(DType::fp8_e4m3fn, {2});
  q.set_value(0, 464.0);
  q.set_value(1, 465.0);
  CHECK(q.bits(0) == 0x7E);
  CHECK(q.bits(1) == 0x7F);
  Tensor i(DType::i64, {1});
  i.set_value(0, -12345678901.0);
  CHECK(i.data<std::int64_t>()[0] == -12345678901LL);
  Tensor f = Tensor(DType::fp8_e5m2, {2, 5}).full(-57344.0);
  for (std::int64_t k = 0; k < f.numel(); ++k) CHECK(f.bits(k) == 0xFB);
  CHECK(Tensor(DType::f32, {0}).full(1.0).numel() == 0);
  Tensor h(DType::fp16, {1});
  h.set_value(0, 65520.0);  // tie between 65504 and 2^16 -> inf
  CHECK(std::isinf(h.value(0)));
}

TEST_CASE("tensor.Case attr accessors and Problem lines") {
  Case c;
  c.file = "f.h5";
  c.name = "c0";
  c.attrs["n"] = std::int64_t{7};
  c.attrs["x"] = 2.5;
  c.attrs["whole"] = 3.0;
  c.attrs["s"] = std::string("neox");
  c.attrs["b"] = std::int64_t{1};
  c.attrs["bs"] = std::string("False");
  c.attrs["v"] = std::vector<std::int64_t>{1, 2};
  CHECK(c.attr_int("n") == 7);
  CHECK(c.attr_int("whole") == 3);
  CHECK(c.attr_int("missing", 5) == 5);
  CHECK(c.attr_float("n") == 7.0);
  CHECK(c.attr_float("x") == 2.5);
  CHECK(c.attr_str("s") == "neox");
  CHECK(c.attr_bool("b"));
  CHECK_FALSE(c.attr_bool("bs"));
  CHECK_THROWS_AS(c.attr_int("x"), SchemaError);
  CHECK_THROWS_AS(c.attr_int("missing"), SchemaError);
  CHECK_THROWS_AS(c.attr_str("n"), SchemaError);
  CHECK_THROWS_AS(c.attr_bool("n"), SchemaError);
  CHECK_THROWS_AS(c.attr_float("s"), SchemaError);
  CHECK_THROWS_AS(c.input("q"), SchemaError);
  CHECK(c.input_opt("q") == nullptr);
  try {
    c.attr_int("x");
  } catch (const SchemaError& e) {
    CHECK(std::string(e.what()) == "f.h5: case 'c0': attr x: expected an integer, found 2.5");
    CHECK(e.problem().case_name == "c0");
  }
  CHECK(attr_to_string(c.attrs["v"]) == "[1, 2]");
  CHECK(attr_to_string(c.attrs["s"]) == "\"neox\"");
  CHECK(Problem{"a.h5", "", "", "an HDF5 file", "a directory"}.str() == "a.h5: expected an HDF5 file, found a directory");
  CHECK(Problem{"", "c", "inputs/q", "rank 3", ""}.str() == "<memory>: case 'c': inputs/q: expected rank 3");
  CHECK(c.where() == "f.h5: case 'c0'");
}

TEST_CASE("tensor.set_value on an integer dtype takes only integers the dtype holds (fuzz finding: 2^31 into int32)") {
  Tensor i32(DType::i32, {2});
  i32.set_value(0, 2147483647.0);
  i32.set_value(1, -2147483648.0);
  CHECK(i32.int_at(0) == 2147483647);
  CHECK(i32.int_at(1) == -2147483648LL);
  CHECK_THROWS_AS(i32.set_value(0, 2147483648.0), std::out_of_range);
  CHECK_THROWS_AS(i32.set_value(0, 0.5), std::out_of_range);
  CHECK_THROWS_AS(i32.set_value(0, std::nan("")), std::out_of_range);
  Tensor u8(DType::u8, {1});
  u8.set_value(0, 255.0);
  CHECK(u8.int_at(0) == 255);
  CHECK_THROWS_AS(u8.set_value(0, -1.0), std::out_of_range);
  Tensor i64(DType::i64, {1});
  CHECK_THROWS_AS(i64.set_value(0, 9223372036854775808.0), std::out_of_range);
  Tensor f32(DType::f32, {1});
  f32.set_value(0, 1e300);  // float dtypes round (to inf here), never throw
  CHECK(std::isinf(f32.value(0)));
}
