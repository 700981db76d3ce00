#include "numerics/dtype.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <utility>

namespace dsa {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "bf16";
    case DType::fp16: return "fp16";
    case DType::fp8_e4m3fn: return "fp8_e4m3fn";
    case DType::fp8_e5m2: return "fp8_e5m2";
    case DType::int8: return "int8";
    case DType::u8: return "uint8";
    case DType::u16: return "uint16";
    case DType::i32: return "int32";
    case DType::i64: return "int64";
    case DType::f32: return "float32";
    case DType::f64: return "float64";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  static const std::array<std::pair<std::string_view, DType>, 27> kAliases{{
      {"bf16", DType::bf16},           {"bfloat16", DType::bf16},        {"fp16", DType::fp16},
      {"f16", DType::fp16},            {"float16", DType::fp16},         {"half", DType::fp16},
      {"fp8_e4m3fn", DType::fp8_e4m3fn}, {"float8_e4m3fn", DType::fp8_e4m3fn}, {"f8_e4m3", DType::fp8_e4m3fn},
      {"e4m3fn", DType::fp8_e4m3fn},   {"fp8_e5m2", DType::fp8_e5m2},    {"float8_e5m2", DType::fp8_e5m2},
      {"f8_e5m2", DType::fp8_e5m2},    {"e5m2", DType::fp8_e5m2},        {"int8", DType::int8},
      {"i8", DType::int8},             {"uint8", DType::u8},             {"u8", DType::u8},
      {"uint16", DType::u16},          {"u16", DType::u16},              {"int32", DType::i32},
      {"i32", DType::i32},             {"int64", DType::i64},            {"i64", DType::i64},
      {"float32", DType::f32},         {"f32", DType::f32},              {"float64", DType::f64},
  }};
  for (const auto& [alias, t] : kAliases)
    if (n == alias) return t;
  if (n == "fp32") return DType::f32;
  if (n == "fp64" || n == "f64" || n == "double") return DType::f64;
  if (n == "float") return DType::f32;
  return std::nullopt;
}

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::fp8_e4m3fn:
    case DType::fp8_e5m2:
    case DType::int8:
    case DType::u8: return 1;
    case DType::bf16:
    case DType::fp16:
    case DType::u16: return 2;
    case DType::i32:
    case DType::f32: return 4;
    case DType::i64:
    case DType::f64: return 8;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::bf16:
    case DType::fp16:
    case DType::fp8_e4m3fn:
    case DType::fp8_e5m2:
    case DType::f32:
    case DType::f64: return true;
    default: return false;
  }
}

bool dtype_is_integer(DType t) { return !dtype_is_float(t); }

bool dtype_stored_as_bits(DType t) {
  return t == DType::bf16 || t == DType::fp16 || t == DType::fp8_e4m3fn || t == DType::fp8_e5m2;
}

}  // namespace dsa
