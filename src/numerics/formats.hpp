// Bit-exact conversions between fp64/fp32 and the low-precision formats of DSA kernels.
//
// Rules (checked exhaustively against ml_dtypes in tests/python/test_numerics_exhaustive.py and, for
// e4m3fn, against torch's CUDA casts as measured on an H200 — see ../shared/specs/toolchain.md):
//  * every conversion rounds ONCE, to nearest, ties to even (RNE), from the exact input value;
//  * subnormals are produced and consumed (no flush to zero); the sign of zero is kept;
//  * bf16 / fp16 / e5m2 overflow (after rounding) gives ±inf; ±inf stays ±inf;
//  * e4m3fn has no inf: a value that rounds above 448 gives NaN (0x7F | sign), so 448 < |x| <= 464 gives ±448
//    (464 is the tie between 448 and the non-existent 480; 448's mantissa is even) and |x| > 464, ±inf and NaN
//    give NaN with the input's sign kept — exactly what torch's `.to(torch.float8_e4m3fn)` and ml_dtypes do.
//    No saturation: producers that want saturation clamp to ±448 before the cast (act_quant does);
//  * NaN input gives the target's canonical quiet NaN with the input's sign (bf16 0x7FC0, fp16 0x7E00,
//    e5m2 0x7E, e4m3fn 0x7F); the payload is dropped (ml_dtypes does the same; numpy's f32 -> f16 keeps part
//    of the payload, which is why tests compare only NaN-ness and sign there);
//  * decoding is exact. bf16 -> f32 is the 16-bit shift, so a bf16 NaN keeps its payload (as in ml_dtypes and
//    torch); fp16 / e5m2 / e4m3fn NaN codes decode to the canonical quiet NaN 0x7FC00000 with the code's sign;
//  * f64 inputs are rounded once from the exact double. ml_dtypes and numpy cast float64 through float32 (two
//    roundings) and can differ by one code next to a tie: 1 + 2^-8 + 2^-40 -> bf16 0x3F81 here, 0x3F80 there.
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/dtype.hpp"
#include "numerics/fp8_core.hpp"
#include "numerics/half_core.hpp"

namespace dsa::num {

inline std::uint32_t f32_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float f32_from_bits(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline std::uint64_t f64_bits(double x) {
  std::uint64_t u;
  std::memcpy(&u, &x, 8);
  return u;
}

// ---- decode (exact) ----
double fp16_to_f64(std::uint16_t bits);
double e4m3_to_f64(std::uint8_t bits);
double e5m2_to_f64(std::uint8_t bits);
inline float bf16_to_f32(std::uint16_t bits) { return f32_from_bits(static_cast<std::uint32_t>(bits) << 16); }
// Inline (the attention stages' key and query decode loops call it per element; out of line it was 15 % of a V4
// sparse attention reference).
inline double bf16_to_f64(std::uint16_t bits) { return static_cast<double>(bf16_to_f32(bits)); }
float fp16_to_f32(std::uint16_t bits);
// Table lookups (all 256 codes), exact. Valid for the lifetime of the program.
const float* e4m3_table();
const float* e5m2_table();
// The table pointer is fetched once per program (these run per element in the caches' dequantization loops).
inline float e4m3_to_f32(std::uint8_t bits) {
  static const float* const t = e4m3_table();
  return t[bits];
}
inline float e5m2_to_f32(std::uint8_t bits) {
  static const float* const t = e5m2_table();
  return t[bits];
}

// ---- encode (one RNE rounding from the exact input) ----
// f64_to_bf16: numerics/half_core.hpp's bit path (inline; the CUDA backend's too), equal to the generic encoder
// f64_to_bf16_generic (tests/cpp/test_numerics.cpp: every rounding class).
inline std::uint16_t f64_to_bf16(double x) { return halfcore::f64_to_bf16(x); }
std::uint16_t f64_to_bf16_generic(double x);
std::uint16_t f64_to_fp16(double x);
std::uint8_t f64_to_e4m3(double x);
std::uint8_t f64_to_e5m2(double x);
// Fast path, identical to f64_to_bf16(double(x)): numerics/half_core.hpp's definition (the CUDA backend's too), inline.
inline std::uint16_t f32_to_bf16(float x) { return halfcore::f32_to_bf16(x); }
inline std::uint16_t f32_to_fp16(float x) { return f64_to_fp16(static_cast<double>(x)); }
// fp32 -> e4m3fn by bit manipulation (the quantizers' hot loop), identical to f64_to_e4m3(double(x)) for every
// fp32 input (tests/cpp/test_numerics.cpp checks every exponent x mantissa-rounding class and 2^24 random inputs):
// RNE, no saturation (|x| > 464 and inf give NaN 0x7F/0xFF with the sign), NaN keeps its sign.
inline std::uint8_t f32_to_e4m3(float x) { return fp8core::f32_to_e4m3(x); }  // numerics/fp8_core.hpp (CPU + CUDA)
inline std::uint8_t f32_to_e5m2(float x) { return f64_to_e5m2(static_cast<double>(x)); }
inline float round_to_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Value of one element stored as raw bits of a low-precision dtype (bf16/fp16/fp8) or a native dtype.
double decode_bits(DType t, std::uint64_t bits);
// Encode a double into the bit pattern of `t` (float dtypes only; integer dtypes: saturating cast is NOT done,
// callers convert integers themselves).
std::uint64_t encode_bits(DType t, double x);

// ---- scales for per-block fp8 quantization (spec v32 §2.5, §3.4, §3.6) ----
// fl32(1/448) = 0x3B124925, the constant the kernels multiply by.
inline float inv448_f32() { return fp8core::inv448(); }
// ue8m0 / pow2 scale: t = fl32(max(amax, eps) * fl32(1/448)); e = ceil(log2 t) via the integer-exponent trick
// ((bits(t) >> 23) & 0xFF) - 127 + (mantissa != 0); returns 2^e. Subnormal t (only with eps < ~1.7e-36) is
// handled exactly with frexp; t == 0 (eps below ~3e-43, amax 0) gives scale 0 = 2^ceil(log2 0) like exp2f(-inf) in
// vLLM. NaN amax gives NaN, amax = inf gives inf (e = 128). eps default is the demo's 1e-4 (fp32 0x38D1B717); vLLM's fused path uses 1e-10.
float ue8m0_scale(float amax, float eps = 1e-4f);
// 2^ceil(log2 t) by the same trick (t >= 0 or NaN).
float pow2_ceil(float t);
// FlashMLA @HEAD / vLLM fp8_ds_mla (2026-07+): 2^ceil(log2(max(fl32(amax/448), eps))) (zero tile: 2^-13 for eps 1e-4).
float pow2_div_scale(float amax, float eps = 1e-4f);
// vLLM concat_and_cache_ds_mla (2026 version): max(fl32(amax/448), floor) with floor = FLT_MIN; floor 0 = plain amax/448.
float fp32_scale_floor(float amax, float floor);
// Plain fp32 scales. `div`: fl32(max(amax, eps) / 448) (DeepGEMM tests, vLLM non-ue8m0);
// `mul`: fl32(max(amax, eps) * fl32(1/448)) (the demo's scale_fmt=None).
float fp32_scale_div(float amax, float eps = 1e-4f);
float fp32_scale_mul(float amax, float eps = 1e-4f);

}  // namespace dsa::num
