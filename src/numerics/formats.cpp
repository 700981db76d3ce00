#include "numerics/formats.hpp"

#include <array>
#include <cmath>
#include <limits>

#include "numerics/half_core.hpp"

namespace dsa::num {
namespace {

// A binary floating-point format: `ebits` exponent bits, `mbits` stored mantissa bits, IEEE bias.
struct Format {
  int ebits;
  int mbits;
  bool has_inf;          // IEEE-like: all-ones exponent is inf/NaN
  std::uint32_t qnan;    // canonical quiet NaN (positive)
  int bias() const { return (1 << (ebits - 1)) - 1; }
  std::uint32_t sign_bit() const { return 1u << (ebits + mbits); }
};

constexpr Format kBF16{8, 7, true, 0x7FC0u};
constexpr Format kFP16{5, 10, true, 0x7E00u};
constexpr Format kE5M2{5, 2, true, 0x7Eu};
constexpr Format kE4M3{4, 3, false, 0x7Fu};  // fn: no inf, 0x7F/0xFF NaN, max 0x7E = 448

double decode(const Format& f, std::uint32_t bits) {
  const bool neg = (bits & f.sign_bit()) != 0;
  const std::uint32_t exp_field = (bits >> f.mbits) & ((1u << f.ebits) - 1);
  const std::uint32_t mant = bits & ((1u << f.mbits) - 1);
  const std::uint32_t exp_max = (1u << f.ebits) - 1;
  double v;
  if (f.has_inf && exp_field == exp_max) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && exp_field == exp_max && mant == (1u << f.mbits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp_field == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - f.bias() - f.mbits);
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << f.mbits)), static_cast<int>(exp_field) - f.bias() - f.mbits);
  }
  return neg ? -v : v;
}

// Largest finite magnitude of the format.
double max_finite(const Format& f) {
  const int emax_field = f.has_inf ? (1 << f.ebits) - 2 : (1 << f.ebits) - 1;
  const std::uint32_t mant_max = f.has_inf ? (1u << f.mbits) - 1 : (1u << f.mbits) - 2;
  return std::ldexp(static_cast<double>(mant_max | (1u << f.mbits)), emax_field - f.bias() - f.mbits);
}

std::uint32_t encode(const Format& f, double x) {
  const std::uint32_t sign = std::signbit(x) ? f.sign_bit() : 0u;
  if (std::isnan(x)) return sign | f.qnan;
  if (std::isinf(x)) return f.has_inf ? (sign | (((1u << f.ebits) - 1) << f.mbits)) : (sign | f.qnan);
  const double a = std::fabs(x);
  if (a == 0.0) return sign;
  const int emin = 1 - f.bias();
  int e2;
  (void)std::frexp(a, &e2);  // a = m * 2^e2, m in [0.5, 1)
  const int e = std::max(e2 - 1, emin);
  // Quantum of the binade (or of the subnormal range). a / q and n * q are exact (power-of-two scaling in
  // range for every finite double we can meet: |e - mbits| is far from the double exponent limits).
  const int qexp = e - f.mbits;
  const double r = std::ldexp(a, -qexp);
  double n = std::nearbyint(r);  // default rounding mode: to nearest, ties to even
  // nearbyint obeys the current rounding mode; we never change it, but be explicit about ties anyway.
  if (std::fabs(r - std::floor(r) - 0.5) == 0.0) {
    const double fl = std::floor(r);
    n = std::fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
  }
  const double v = std::ldexp(n, qexp);
  if (v > max_finite(f)) return f.has_inf ? (sign | (((1u << f.ebits) - 1) << f.mbits)) : (sign | f.qnan);
  if (v < std::ldexp(1.0, emin)) {  // subnormal (or rounded to zero)
    return sign | static_cast<std::uint32_t>(n);
  }
  int ev;
  (void)std::frexp(v, &ev);
  ev -= 1;
  const double m = std::ldexp(v, f.mbits - ev) - std::ldexp(1.0, f.mbits);
  return sign | (static_cast<std::uint32_t>(ev + f.bias()) << f.mbits) | static_cast<std::uint32_t>(m);
}

template <const Format& F>
std::array<float, 256> make_table() {
  std::array<float, 256> t{};
  for (unsigned i = 0; i < 256; ++i) t[i] = static_cast<float>(decode(F, i));
  return t;
}

}  // namespace

double fp16_to_f64(std::uint16_t bits) { return decode(kFP16, bits); }
double e4m3_to_f64(std::uint8_t bits) { return decode(kE4M3, bits); }
double e5m2_to_f64(std::uint8_t bits) { return decode(kE5M2, bits); }
float fp16_to_f32(std::uint16_t bits) { return static_cast<float>(decode(kFP16, bits)); }

const float* e4m3_table() {
  static const std::array<float, 256> t = make_table<kE4M3>();
  return t.data();
}
const float* e5m2_table() {
  static const std::array<float, 256> t = make_table<kE5M2>();
  return t.data();
}

std::uint16_t f64_to_bf16_generic(double x) { return static_cast<std::uint16_t>(encode(kBF16, x)); }
std::uint16_t f64_to_fp16(double x) { return static_cast<std::uint16_t>(encode(kFP16, x)); }
std::uint8_t f64_to_e4m3(double x) { return static_cast<std::uint8_t>(encode(kE4M3, x)); }
std::uint8_t f64_to_e5m2(double x) { return static_cast<std::uint8_t>(encode(kE5M2, x)); }


double decode_bits(DType t, std::uint64_t bits) {
  switch (t) {
    case DType::bf16: return bf16_to_f64(static_cast<std::uint16_t>(bits));
    case DType::fp16: return fp16_to_f64(static_cast<std::uint16_t>(bits));
    case DType::fp8_e4m3fn: return e4m3_to_f64(static_cast<std::uint8_t>(bits));
    case DType::fp8_e5m2: return e5m2_to_f64(static_cast<std::uint8_t>(bits));
    case DType::f32: return static_cast<double>(f32_from_bits(static_cast<std::uint32_t>(bits)));
    case DType::f64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case DType::int8: return static_cast<double>(static_cast<std::int8_t>(bits));
    case DType::u8: return static_cast<double>(static_cast<std::uint8_t>(bits));
    case DType::u16: return static_cast<double>(static_cast<std::uint16_t>(bits));
    case DType::i32: return static_cast<double>(static_cast<std::int32_t>(bits));
    case DType::i64: return static_cast<double>(static_cast<std::int64_t>(bits));
  }
  return 0.0;
}

std::uint64_t encode_bits(DType t, double x) {
  switch (t) {
    case DType::bf16: return f64_to_bf16(x);
    case DType::fp16: return f64_to_fp16(x);
    case DType::fp8_e4m3fn: return f64_to_e4m3(x);
    case DType::fp8_e5m2: return f64_to_e5m2(x);
    case DType::f32: return f32_bits(static_cast<float>(x));
    case DType::f64: return f64_bits(x);
    default: return 0;
  }
}

// The scale rules live in numerics/fp8_core.hpp (one definition for the CPU reference and the CUDA backend).
float pow2_ceil(float t) { return fp8core::pow2_ceil(t); }
float ue8m0_scale(float amax, float eps) { return fp8core::scale_of(fp8core::Fmt::ue8m0, amax, eps); }
float pow2_div_scale(float amax, float eps) { return fp8core::scale_of(fp8core::Fmt::pow2_div, amax, eps); }
float fp32_scale_floor(float amax, float floor) { return fp8core::scale_of(fp8core::Fmt::fp32_floor, amax, floor); }
float fp32_scale_div(float amax, float eps) { return fp8core::scale_of(fp8core::Fmt::fp32_div, amax, eps); }
float fp32_scale_mul(float amax, float eps) { return fp8core::scale_of(fp8core::Fmt::fp32_mul, amax, eps); }

}  // namespace dsa::num
