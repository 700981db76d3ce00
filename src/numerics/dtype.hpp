// Logical dtypes of dsa-check tensors and their storage rules (schema v1: low-precision floats are raw bits).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsa {

enum class DType : std::uint8_t {
  bf16,        // stored as uint16 bits
  fp16,        // stored as uint16 bits
  fp8_e4m3fn,  // stored as uint8 bits (OCP e4m3fn: bias 7, max 448, no inf, NaN = 0x7F/0xFF)
  fp8_e5m2,    // stored as uint8 bits (IEEE-like: bias 15, max 57344, inf, NaN)
  int8,
  u8,
  u16,
  i32,
  i64,
  f32,
  f64,
};

inline constexpr DType kAllDTypes[] = {DType::bf16, DType::fp16, DType::fp8_e4m3fn, DType::fp8_e5m2,
                                       DType::int8, DType::u8,   DType::u16,        DType::i32,
                                       DType::i64,  DType::f32,  DType::f64};

// Canonical name, as written in the `dtype` attribute and printed by the CLI.
std::string_view dtype_name(DType t);
// Accepts the canonical names plus common aliases (bfloat16, float8_e4m3fn, F8_E4M3, float32, int32, ...).
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType t);
bool dtype_is_float(DType t);    // has a floating-point value (incl. bf16/fp16/fp8)
bool dtype_is_integer(DType t);  // int8, u8, u16, i32, i64
// True for dtypes that schema v1 stores as raw bits plus a `dtype` attribute.
bool dtype_stored_as_bits(DType t);

}  // namespace dsa
