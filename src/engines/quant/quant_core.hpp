// THE block quantizer of every fp8 writer, host and device (determinism contract way 3: one fixed sequence of IEEE
// fp32 and integer operations; numerics/fp8_core.hpp holds the codec and the scale formulas):
//   amax = max |x| over the block (exact; NaN propagates)  ->  s = the producer's scale rule (ScaleRule)
//   ->  the element step: x / s, or fl32(x * fl32(1/s)) when the producer multiplies or the reciprocal is exact
//   ->  clamp to +-448 (NaN stays NaN)  ->  RNE to e4m3.
// indexer.quant, indexer.prolog and mla.kcache_store call it on the CPU (block_quant.hpp: the same steps with the
// element loop vectorized) and in their CUDA kernels (quantize_block_hd with element accessors).
// Plain C++17, no libm: nvcc compiles it for the device.
#pragma once
#include <cstdint>

#include "numerics/fp8_core.hpp"
#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::quant {

// The scale rule of a producer: one object, every form the writers use (spec v32 §2.5, §3.4, §3.6, §6.3; v4 §10):
//   a = max(amax, eps)            when the floor is on amax (eps_on amax), else a = amax
//   t = fl32(a / 448)             op div: an IEEE division (torch on the CPU, CUDA C `/`, Triton div_rn)
//     | fl32(a * fl32(1/448))     op mul: torch on CUDA turns `amax / 448.0` into this multiply; act_quant kernels
//   t = max(t, eps)               when the floor is on the scale (eps_on scale)
//   s = t | bf16(t) | 2^ceil(log2 t)   round fp32 | bf16 (a scale tensor kept in bf16) | pow2 (ue8m0, e8m0 bytes)
// A NaN amax gives a NaN scale (torch clamp semantics). The rounding steps are monotone, so flooring before or after
// them gives the same scale. The attr values that name rules are in quant_attrs.hpp (scale_fmt, eps_on, amax_eps).
enum class ScaleRound : int { fp32, bf16, pow2 };
enum class ScaleOp : int { div, mul };
enum class EpsOn : int { amax, scale };
struct ScaleRule {
  ScaleRound round = ScaleRound::pow2;
  ScaleOp op = ScaleOp::mul;
  EpsOn eps_on = EpsOn::amax;
  float eps = 1e-4f;
};
// The named rules (the values of attr scale_fmt; quant_attrs.cpp) at their producers' floors.
DSA_HD inline ScaleRule ue8m0_rule(float eps = 1e-4f) { return {ScaleRound::pow2, ScaleOp::mul, EpsOn::amax, eps}; }
DSA_HD inline ScaleRule pow2_rule(float eps = 1e-4f) { return {ScaleRound::pow2, ScaleOp::div, EpsOn::scale, eps}; }
DSA_HD inline ScaleRule fp32_div_rule(float eps = 1e-4f) { return {ScaleRound::fp32, ScaleOp::div, EpsOn::amax, eps}; }
DSA_HD inline ScaleRule fp32_mul_rule(float eps = 1e-4f) { return {ScaleRound::fp32, ScaleOp::mul, EpsOn::amax, eps}; }

DSA_HD inline float scale_of(const ScaleRule& r, float amax) {
  if (fp8core::is_nan(amax)) return amax;
  const float a = r.eps_on == EpsOn::amax ? fp8core::fmax_ieee(amax, r.eps) : amax;
  float t = r.op == ScaleOp::div ? a / 448.0f : a * fp8core::inv448();
  if (r.eps_on == EpsOn::scale) t = fp8core::fmax_ieee(t, r.eps);
  switch (r.round) {
    case ScaleRound::bf16: return halfcore::round_to_bf16(t);
    case ScaleRound::pow2: return fp8core::pow2_ceil(t);
    default: return t;
  }
}

// The element step: a true division by s, or a multiplication by fl32(1/s).
enum class ScaleApply { div, mul_inv };

struct QuantParams {
  ScaleRule scale;
  ScaleApply apply = ScaleApply::div;
  bool clamp = true;  // clamp x/s to [-448, 448] before the e4m3 cast
};

// A block's scale and the element step it implies.
struct BlockScale {
  float s = 0.0f;    // the scale (what the writer stores)
  float inv = 0.0f;  // fl32(1 / s)
  bool mul = false;  // the element step multiplies by inv: the producer does, or 1/s is exact (same bits as x / s)
};

DSA_HD inline BlockScale block_scale(float amax, const QuantParams& p) {
  BlockScale b;
  b.s = scale_of(p.scale, amax);
  b.inv = 1.0f / b.s;
  b.mul = p.apply == ScaleApply::mul_inv || fp8core::exact_reciprocal(b.s, b.inv);
  return b;
}

DSA_HD inline std::uint8_t encode(float x, const BlockScale& b, const QuantParams& p) {
  return fp8core::encode(x, b.mul, p.clamp, b.s, b.inv);
}

// One block of n values through accessors: x(i) gives element i as fp32, put(i, code) stores its e4m3 code.
// Returns the scale.
template <class X, class Put>
DSA_HD float quantize_block_with(X x, std::int64_t n, const QuantParams& p, Put put) {
  float amax = 0.0f;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = fp8core::from_bits(fp8core::bits(x(i)) & 0x7FFFFFFFu);
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  const BlockScale b = block_scale(nan ? fp8core::quiet_nan() : amax, p);
  for (std::int64_t i = 0; i < n; ++i) put(i, encode(x(i), b, p));
  return b.s;
}

// The same over arrays: n fp32 values -> n codes.
DSA_HD inline float quantize_block_hd(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y) {
  return quantize_block_with([x](std::int64_t i) { return x[i]; }, n, p, [y](std::int64_t i, std::uint8_t c) { y[i] = c; });
}

// bf16 bits -> fp32 (exact).
DSA_HD inline float bf16_value(std::uint16_t b) { return fp8core::from_bits(static_cast<std::uint32_t>(b) << 16); }

// ---- int8 codes: the dynamic per-row quantization of the Ascend A2/A3 kernels (spec v4 §3.4) ----------------------
//   amax = max |x| (exact; NaN propagates)  ->  scale = fl32(amax * fl32(1/127)), inv = fl32(127 / amax)
//   ->  codes rint(fl32(x * inv)) (half to even), clamped to +-127, a NaN product coded 0
// A NaN block: codes 0, scale NaN. An all-zero block: codes 0, scale per Int8Rule::zero_scale.
enum class Int8ZeroScale { one, zero };  // 1 (ops-nn golden.py) or 0 (the kernel's arithmetic)
struct Int8Rule {
  Int8ZeroScale zero_scale = Int8ZeroScale::one;
  // Producer bugs the selftest plants (never set by a dump): scale = amax / 127 (a true division), codes truncated.
  bool scale_div127 = false, codes_trunc = false;
};
// fl32(1/127) = 0x3C010204 as a bit pattern, so no compiler folds the constant differently.
DSA_HD inline float inv127_f32() { return fp8core::from_bits(0x3C010204u); }

// One block of n bf16 values (bits) -> n int8 codes; returns the fp32 scale.
DSA_HD inline float quantize_int8_block(const std::uint16_t* x, std::int64_t n, const Int8Rule& r, std::int8_t* codes) {
  float amax = 0;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    const float a = hd::abs(halfcore::bf16_to_f32(x[i]));
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  if (nan || amax == 0) {
    for (std::int64_t i = 0; i < n; ++i) codes[i] = 0;
    if (nan) return fp8core::quiet_nan();
    return r.zero_scale == Int8ZeroScale::one ? 1.0f : 0.0f;
  }
  const float scale = r.scale_div127 ? amax / 127.0f : amax * inv127_f32();
  const float inv = 127.0f / amax;
  for (std::int64_t i = 0; i < n; ++i) {
    const float y = halfcore::bf16_to_f32(x[i]) * inv;
    const float q = r.codes_trunc ? hd::trunc(y) : hd::rint(y);  // half to even
    codes[i] = hd::is_nan(q) ? std::int8_t{0} : static_cast<std::int8_t>(hd::clamp(q, -127.0f, 127.0f));  // inf * 0 = NaN -> 0
  }
  return scale;
}

}  // namespace dsa::quant
