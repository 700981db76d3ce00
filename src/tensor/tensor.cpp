#include "tensor/tensor.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <new>
#include <sstream>

namespace dsa {

std::string shape_str(const Shape& s) {
  std::ostringstream o;
  o << '[';
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

std::int64_t checked_numel(const Shape& s) {
  std::int64_t n = 1;
  for (std::int64_t d : s) {
    if (d < 0) throw std::overflow_error("negative dimension in shape " + shape_str(s));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw std::overflow_error("element count of shape " + shape_str(s) + " overflows 64 bits");
    n *= d;
  }
  return n;
}

namespace {

constexpr std::size_t kHuge = std::size_t{2} << 20;  // x86-64 huge page

// Big buffers: their own anonymous mapping, huge-page aligned and advised (THP "madvise" mode is common), so that a
// 1 GiB tensor takes 512 page faults instead of 262144. A fresh mapping reads as zeros, so a zero tensor costs no
// memset and no page is touched before it is written: a bound tensor that stays 0 over most of a big cache (the
// state rows a step does not write) is read from the kernel's zero page. Small ones: operator new, zeroed when asked
// (a file read or a reference output writes every byte anyway).
std::shared_ptr<std::byte> allocate_bytes(std::size_t n, bool zero) {
  if (n >= (std::size_t{4} << 20)) {
    const std::size_t rounded = (n + kHuge - 1) / kHuge * kHuge;
    if (rounded > std::numeric_limits<std::size_t>::max() - kHuge) throw std::bad_alloc();
    void* m = ::mmap(nullptr, rounded + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    const auto base = reinterpret_cast<std::uintptr_t>(m), a = (base + kHuge - 1) / kHuge * kHuge;
    if (a > base) ::munmap(m, a - base);  // the unaligned head and tail go back
    if (base + kHuge > a) ::munmap(reinterpret_cast<void*>(a + rounded), base + kHuge - a);
    void* p = reinterpret_cast<void*>(a);
#ifdef MADV_HUGEPAGE
    ::madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [rounded](std::byte* q) { ::munmap(q, rounded); });
  }
  auto* p = new std::byte[std::max<std::size_t>(n, 1)];
  if (zero) std::memset(p, 0, n);
  return std::shared_ptr<std::byte>(p, std::default_delete<std::byte[]>());
}

}  // namespace

void Tensor::allocate(bool zero) {
  numel_ = checked_numel(shape_);
  const std::size_t es = dtype_size(dtype_);
  if (static_cast<std::uint64_t>(numel_) > std::numeric_limits<std::size_t>::max() / es)
    throw std::overflow_error("byte size of shape " + shape_str(shape_) + " overflows");
  storage_ = allocate_bytes(static_cast<std::size_t>(numel_) * es, zero);
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) { allocate(true); }
Tensor::Tensor(DType dtype, Shape shape, Uninit) : dtype_(dtype), shape_(std::move(shape)) { allocate(false); }

Tensor Tensor::deferred(DType dtype, Shape shape, std::shared_ptr<const RowSource> src) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = checked_numel(t.shape_);
  t.source_ = std::move(src);
  return t;
}

Tensor Tensor::rows(std::int64_t r0, std::int64_t r1) const {
  if (rank() == 0 || r0 < 0 || r1 < r0 || r1 > shape_[0])
    throw std::out_of_range("Tensor::rows: [" + std::to_string(r0) + ", " + std::to_string(r1) + ") of " + shape_str(shape_));
  if (source_) return source_->read_rows(r0, r1);
  return slice0(r0, r1);
}

std::int64_t Tensor::dim(int i) const {
  const int r = rank();
  const int k = i < 0 ? i + r : i;
  if (k < 0 || k >= r) throw std::out_of_range("Tensor::dim: " + std::to_string(i) + " for rank " + std::to_string(r));
  return shape_[static_cast<std::size_t>(k)];
}

std::uint64_t Tensor::bits(std::int64_t i) const {
#ifndef NDEBUG
  if (i < 0 || i >= numel_) throw std::out_of_range("Tensor::bits: index out of range");
#endif
  const std::byte* p = raw() + static_cast<std::size_t>(i) * dtype_size(dtype_);
  switch (dtype_size(dtype_)) {
    case 1: {
      std::uint8_t v;
      std::memcpy(&v, p, 1);
      return v;
    }
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p, 2);
      return v;
    }
    case 4: {
      std::uint32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      std::uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

std::int64_t Tensor::int_at(std::int64_t i) const {
  const std::uint64_t b = bits(i);
  switch (dtype_) {
    case DType::int8: return static_cast<std::int8_t>(b);
    case DType::u8:
    case DType::u16: return static_cast<std::int64_t>(b);
    case DType::i32: return static_cast<std::int32_t>(b);
    case DType::i64: return static_cast<std::int64_t>(b);
    default: throw std::logic_error("Tensor::int_at on a " + std::string(dtype_name(dtype_)) + " tensor");
  }
}

void Tensor::set_value(std::int64_t i, double v) {
#ifndef NDEBUG
  if (i < 0 || i >= numel_) throw std::out_of_range("Tensor::set_value: index out of range");
#endif
  std::byte* p = raw() + static_cast<std::size_t>(i) * dtype_size(dtype_);
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  // Integer dtypes: the value must be an integer the type holds (a cast of anything else is undefined behaviour).
  auto fits = [&](double lo, double hi) {
    if (!(v >= lo && v <= hi) || v != std::trunc(v))
      throw std::out_of_range("Tensor::set_value: " + std::to_string(v) + " does not fit a " + std::string(dtype_name(dtype_)) + " element");
  };
  switch (dtype_) {
    case DType::int8: fits(-128.0, 127.0); break;
    case DType::u8: fits(0.0, 255.0); break;
    case DType::u16: fits(0.0, 65535.0); break;
    case DType::i32: fits(-2147483648.0, 2147483647.0); break;
    case DType::i64: fits(-9223372036854775808.0, 9223372036854774784.0); break;
    default: break;
  }
  switch (dtype_) {
    case DType::int8: put(static_cast<std::int8_t>(v)); break;
    case DType::u8: put(static_cast<std::uint8_t>(v)); break;
    case DType::u16: put(static_cast<std::uint16_t>(v)); break;
    case DType::i32: put(static_cast<std::int32_t>(v)); break;
    case DType::i64: put(static_cast<std::int64_t>(v)); break;
    case DType::f32: put(static_cast<float>(v)); break;
    case DType::f64: put(v); break;
    case DType::bf16:
    case DType::fp16: put(static_cast<std::uint16_t>(num::encode_bits(dtype_, v))); break;
    case DType::fp8_e4m3fn:
    case DType::fp8_e5m2: put(static_cast<std::uint8_t>(num::encode_bits(dtype_, v))); break;
  }
}

Tensor Tensor::full(double value) const {
  Tensor t(dtype_, shape_, Uninit{});
  if (t.numel_ == 0) return t;
  t.set_value(0, value);
  const std::size_t es = dtype_size(dtype_);
  for (std::int64_t i = 1; i < t.numel_; ++i) std::memcpy(t.raw() + static_cast<std::size_t>(i) * es, t.raw(), es);
  return t;
}

Tensor Tensor::slice0(std::int64_t begin, std::int64_t end) const {
  if (rank() == 0 || begin < 0 || end < begin || end > shape_[0])
    throw std::out_of_range("Tensor::slice0: [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of " + shape_str(shape_));
  if (source_) throw std::logic_error("Tensor::slice0 of a deferred tensor (use rows())");
  Tensor t = *this;
  const std::int64_t inner = shape_[0] == 0 ? 0 : numel_ / shape_[0];
  t.shape_[0] = end - begin;
  t.numel_ = inner * (end - begin);
  t.offset_ = offset_ + static_cast<std::size_t>(begin * inner) * dtype_size(dtype_);
  return t;
}

Tensor Tensor::row(std::int64_t i) const {
  Tensor t = slice0(i, i + 1);
  t.shape_.erase(t.shape_.begin());
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  if (checked_numel(shape) != numel_)
    throw std::invalid_argument("Tensor::reshape: " + shape_str(shape_) + " -> " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::view_as(DType dtype) const {
  if (dtype_size(dtype) != dtype_size(dtype_))
    throw std::invalid_argument("Tensor::view_as: element sizes differ");
  Tensor t = *this;
  t.dtype_ = dtype;
  return t;
}

Tensor Tensor::clone() const {
  if (source_) throw std::logic_error("Tensor::clone of a deferred tensor (read its rows)");
  Tensor t(dtype_, shape_, Uninit{});
  const std::size_t nb = nbytes();
  constexpr std::size_t kPiece = std::size_t{4} << 20;  // a large copy runs on all cores (its page faults too)
  if (nb > 16 * kPiece) {
    const auto pieces = static_cast<std::int64_t>((nb + kPiece - 1) / kPiece);
#pragma omp parallel for schedule(static)
    for (std::int64_t k = 0; k < pieces; ++k) {
      const std::size_t a = static_cast<std::size_t>(k) * kPiece;
      std::memcpy(t.raw() + a, raw() + a, std::min(kPiece, nb - a));
    }
  } else if (nb) {
    std::memcpy(t.raw(), raw(), nb);
  }
  return t;
}

bool Tensor::same_bytes(const Tensor& o) const {
  return dtype_ == o.dtype_ && shape_ == o.shape_ && (nbytes() == 0 || std::memcmp(raw(), o.raw(), nbytes()) == 0);
}

}  // namespace dsa
