// Helpers shared by the comparators (internal to src/compare).
#pragma once
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

#include "compare/compare.hpp"

namespace dsa::cmp::detail {

inline std::string describe(const RefTensor& ref, std::int64_t flat) {
  if (ref.describe) return ref.describe(flat);
  return "element " + std::to_string(flat);
}

// Short formatting of derived metrics (err/M, recall, ...): %.6g.
inline std::string fmt(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

// An element's value, exactly: the shortest decimal that round-trips, as a float when the value is one (every
// fp32 / bf16 / fp16 / fp8 value is), else as a double.
inline std::string exact(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char b[64];
  const auto f = static_cast<float>(x);
  const auto r = static_cast<double>(f) == x ? std::to_chars(b, b + sizeof b, f) : std::to_chars(b, b + sizeof b, x);
  return std::string(b, r.ptr);
}

// ulp of x in a binary format with `p` bits of precision and minimum normal exponent `emin`.
inline double ulp_at(double x, int p, int emin) {
  int e = emin;
  if (x != 0 && std::isfinite(x)) {
    int ex;
    std::frexp(x, &ex);  // |x| = m * 2^ex, m in [0.5, 1) -> floor(log2|x|) = ex - 1
    e = std::max(ex - 1, emin);
  }
  return std::ldexp(1.0, e - (p - 1));
}

inline void ulp_format(DType t, int& p, int& emin) {
  switch (t) {
    case DType::bf16: p = 8; emin = -126; break;
    case DType::fp16: p = 11; emin = -14; break;
    case DType::f64: p = 53; emin = -1022; break;
    case DType::fp8_e4m3fn: p = 4; emin = -6; break;
    case DType::fp8_e5m2: p = 3; emin = -14; break;
    default: p = 24; emin = -126; break;
  }
}

// The raw bits of element i of t in hex, zero-padded to the dtype's width.
inline std::string hex_bits(const Tensor& t, std::int64_t i) {
  char b[24];
  std::snprintf(b, sizeof b, "%0*llx", static_cast<int>(2 * dtype_size(t.dtype())), static_cast<unsigned long long>(t.bits(i)));
  return b;
}

// A location of element i of `out` against `ref` (same shape), with the bits and the ulp distance for messages.
inline Location location(const Tensor& out, const Tensor& ref, std::int64_t i, std::string where, double err, double bound) {
  Location l{i, std::move(where), out.value(i), ref.value(i), err, bound, hex_bits(out, i), hex_bits(ref, i), -1, true};
  if (dtype_is_float(out.dtype()) && std::isfinite(l.out) && std::isfinite(l.ref)) {
    int p = 24, emin = -126;
    ulp_format(out.dtype(), p, emin);
    l.ulps = std::fabs(l.out - l.ref) / ulp_at(l.ref, p, emin);
  }
  return l;
}

// "row 3 key 17 (out 1.5, ref 1.25, 2 ulp)"; the bits when the values print alike (NaN payloads, -0 vs 0).
inline std::string loc_str(const Location& l) {
  if (!l.has_values) return l.where;
  std::string s = l.where + " (out " + exact(l.out) + ", ref " + exact(l.ref);
  if (exact(l.out) == exact(l.ref) && l.out_bits != l.ref_bits && !l.out_bits.empty())
    s += "; bits 0x" + l.out_bits + " vs 0x" + l.ref_bits;
  else if (l.ulps > 0)
    s += ", " + fmt(l.ulps) + " ulp";
  return s + ")";
}

}  // namespace dsa::cmp::detail
