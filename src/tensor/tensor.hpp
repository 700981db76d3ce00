// Tensor: owning (shared storage), row-major, contiguous, with a logical dtype. Views along the leading
// dimension and reshapes share storage and are O(1). Element access is typed by the storage type
// (uint16_t for bf16/fp16, uint8_t for fp8, int8_t for int8, ...); `value(i)` decodes any dtype to double.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "numerics/dtype.hpp"
#include "numerics/formats.hpp"

namespace dsa {

using Shape = std::vector<std::int64_t>;
std::string shape_str(const Shape& s);  // "[4, 64, 128]"

// Product of dims; throws std::overflow_error if it does not fit in int64 or a dim is negative.
std::int64_t checked_numel(const Shape& s);

// Storage type of each logical dtype.
template <DType T> struct storage_of;
template <> struct storage_of<DType::bf16> { using type = std::uint16_t; };
template <> struct storage_of<DType::fp16> { using type = std::uint16_t; };
template <> struct storage_of<DType::fp8_e4m3fn> { using type = std::uint8_t; };
template <> struct storage_of<DType::fp8_e5m2> { using type = std::uint8_t; };
template <> struct storage_of<DType::int8> { using type = std::int8_t; };
template <> struct storage_of<DType::u8> { using type = std::uint8_t; };
template <> struct storage_of<DType::u16> { using type = std::uint16_t; };
template <> struct storage_of<DType::i32> { using type = std::int32_t; };
template <> struct storage_of<DType::i64> { using type = std::int64_t; };
template <> struct storage_of<DType::f32> { using type = float; };
template <> struct storage_of<DType::f64> { using type = double; };

class Tensor;

// Where the rows of a deferred tensor live (e.g. a dataset of an HDF5 dump too big to hold whole): rows [r0, r1) of
// dim 0 on demand, as an ordinary tensor. Throws std::runtime_error naming the file and tensor on a read failure.
struct RowSource {
  virtual ~RowSource() = default;
  virtual Tensor read_rows(std::int64_t r0, std::int64_t r1) const = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised tensor.
  Tensor(DType dtype, Shape shape);
  // Uninitialised storage (every element is written before it is read: file reads, reference outputs). Buffers of
  // 4 MiB and more are 2 MiB aligned and advised as huge pages (fewer page faults on first touch).
  struct Uninit {};
  Tensor(DType dtype, Shape shape, Uninit);
  // A tensor whose data is not in memory: dtype and shape only, rows read on demand through `src` (rows()).
  // defined() is false; data()/raw() must not be used.
  static Tensor deferred(DType dtype, Shape shape, std::shared_ptr<const RowSource> src);
  bool is_deferred() const { return static_cast<bool>(source_); }
  // Rows [r0, r1) of dim 0: a view of an in-memory tensor, a read for a deferred one.
  Tensor rows(std::int64_t r0, std::int64_t r1) const;
  static Tensor zeros(DType dtype, Shape shape) { return Tensor(dtype, std::move(shape)); }
  template <typename T>
  static Tensor from_vector(DType dtype, Shape shape, const std::vector<T>& v) {
    Tensor t(dtype, std::move(shape));
    if (sizeof(T) != dtype_size(dtype) || v.size() != static_cast<std::size_t>(t.numel()))
      throw std::invalid_argument("Tensor::from_vector: size or element type mismatch");
    if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(T));
    return t;
  }
  Tensor full(double value) const;  // same dtype/shape, every element = encode(value)

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int i) const;  // negative i counts from the end
  std::int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  bool defined() const { return static_cast<bool>(storage_); }
  bool empty() const { return numel_ == 0; }

  std::byte* raw() { return storage_ ? storage_.get() + offset_ : nullptr; }
  const std::byte* raw() const { return storage_ ? storage_.get() + offset_ : nullptr; }

  template <typename T>
  T* data() {
    check_type<T>();
    return reinterpret_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    check_type<T>();
    return reinterpret_cast<const T*>(raw());
  }
  template <typename T>
  std::span<T> span() {
    return {data<T>(), static_cast<std::size_t>(numel_)};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<std::size_t>(numel_)};
  }

  // Flat index of a multi-index; bounds-checked in debug builds.
  std::int64_t flat(std::initializer_list<std::int64_t> idx) const {
#ifndef NDEBUG
    if (idx.size() != shape_.size()) throw std::out_of_range("Tensor: wrong number of indices");
#endif
    std::int64_t f = 0;
    std::size_t k = 0;
    for (std::int64_t i : idx) {
#ifndef NDEBUG
      if (i < 0 || i >= shape_[k]) throw std::out_of_range("Tensor: index out of range");
#endif
      f = f * shape_[k++] + i;
    }
    return f;
  }
  template <typename T>
  T& at(std::initializer_list<std::int64_t> idx) {
    return data<T>()[flat(idx)];
  }
  template <typename T>
  const T& at(std::initializer_list<std::int64_t> idx) const {
    return data<T>()[flat(idx)];
  }

  // Raw bits of element i (zero-extended), and its decoded value.
  std::uint64_t bits(std::int64_t i) const;
  double value(std::int64_t i) const { return num::decode_bits(dtype_, bits(i)); }
  // Exact integer value of element i of an integer tensor (int8, uint8, uint16, int32, int64): no trip through
  // double, so every int64 index survives. Throws std::logic_error for float dtypes.
  std::int64_t int_at(std::int64_t i) const;
  void set_value(std::int64_t i, double v);  // float dtypes: one RNE rounding; integer dtypes: exact cast

  // Views (share storage).
  Tensor slice0(std::int64_t begin, std::int64_t end) const;  // rows [begin, end) of dim 0
  Tensor row(std::int64_t i) const;                           // dim 0 index i, rank - 1
  Tensor reshape(Shape shape) const;                          // same numel
  Tensor view_as(DType dtype) const;                          // same element size, reinterpret
  Tensor clone() const;                                       // deep copy
  bool sole_owner() const { return storage_ && storage_.use_count() == 1; }  // no other tensor (view, input) shares the bytes
  bool same_bytes(const Tensor& o) const;                     // dtype, shape and bytes equal

 private:
  template <typename T>
  void check_type() const {
    if (sizeof(T) != dtype_size(dtype_))
      throw std::logic_error(std::string("Tensor: element type does not match dtype ") +
                             std::string(dtype_name(dtype_)));
  }
  DType dtype_ = DType::f32;
  Shape shape_;
  std::int64_t numel_ = 0;
  void allocate(bool zero);
  std::shared_ptr<std::byte> storage_;
  std::size_t offset_ = 0;  // bytes
  std::shared_ptr<const RowSource> source_;  // deferred tensors only
};

}  // namespace dsa
