// The per-logit arithmetic of the exact indexer logits reference that the CPU (logits_engine.hpp, logits_simd.cpp)
// and the CUDA backend (logits_cuda.cu) share (determinism contract, way 3: one fixed sequence of IEEE fp64
// operations compiled for both, --fmad=false / -ffp-contract=off). Plain C++17, no project includes but the HD
// numerics, so nvcc compiles it for the device.
//   head_lanes   the 8-lane head sums of logits_engine.hpp (2): lane l = h mod 8 in increasing h, one fused
//                multiply-add per head and lane (a = fma(relu(s), w, a): one rounding, three fp64 operations per
//                score with the conversion on the GPU instead of five)
//   tree8        ((x0+x1)+(x2+x3))+((x4+x5)+(x6+x7)) = tree4(x) + tree4(x + 4)
//   round_bits   RNE of an f64 to fp32 / bf16 bits, NaN -> the canonical code
//   certify      v = acc * sc, M = mag * sc and the rounding certificate of (2); false = the exact fallback decides
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/exact_digits.hpp"
#include "numerics/fp8_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::engines::logits::core {

// relu keeping NaN (max(0, NaN) would drop it).
DSA_HD inline double relu(double s) { return s < 0.0 ? 0.0 : s; }
DSA_HD inline double tree4(const double* x) { return (x[0] + x[1]) + (x[2] + x[3]); }
DSA_HD inline double tree8(const double* x) { return tree4(x) + tree4(x + 4); }

// Adds heads [h0, h1) (h0 and h1 multiples of 8) of one logit to the lanes: a[h % 8] = fma(relu(s_h), wd_h, a[h % 8]),
// m likewise with wa_h = |wd_h|; s(h), wd(h), wa(h) read head h. Every caller (CPU generic path, GPU) performs exactly these
// operations in this order; the CPU SIMD paths are checked to agree bit for bit.
template <class S, class Wd, class Wa>
DSA_HD inline void head_lanes(S s, Wd wd, Wa wa, int h0, int h1, double* a, double* m) {
  for (int h = h0; h < h1; h += 8)
    for (int l = 0; l < 8; ++l) {  // constant trip count: the lanes stay in registers on the device
      const double r = relu(s(h + l));
      a[l] = hd::fma(r, wd(h + l), a[l]);
      m[l] = hd::fma(r, wa(h + l), m[l]);
    }
}

// The half of head_lanes that feeds lanes 4*half .. 4*half+3 (a[0..3], m[0..3]): the same operations on those lanes.
// Two threads running both halves and adding their tree4 results give tree8 of head_lanes bit for bit.
template <class S, class Wd, class Wa>
DSA_HD inline void head_lanes_half(S s, Wd wd, Wa wa, int h0, int h1, int half, double* a, double* m) {
  for (int h = h0 + 4 * half; h < h1; h += 8)
    for (int l = 0; l < 4; ++l) {
      const double r = relu(s(h + l));
      a[l] = hd::fma(r, wd(h + l), a[l]);
      m[l] = hd::fma(r, wa(h + l), m[l]);
    }
}

// RNE of v to fp32 or bf16 bits; NaN gives one fixed code (its sign would depend on the ISA's operation order).
DSA_HD inline std::uint32_t round_bits(double v, bool bf16) {
  if (v != v) return bf16 ? 0x7FC0u : 0x7FC00000u;
  return bf16 ? exactdot::f64_to_bf16_odd(v) : fp8core::bits(static_cast<float>(v));
}

// (2) of logits_engine.hpp: acc/mag are the pre-scale head sums, sc the key's scale. Sets M = mag * sc and, when
// the certificate holds (or a non-finite value takes path (3)), the target bits; returns false when v -/+ err
// round differently (the caller rounds the exact value: logits::exact_round).
DSA_HD inline bool certify(double acc, double mag, float sc, int H, bool bf16, std::uint32_t& bits, double& M) {
  const double v = acc * static_cast<double>(sc);
  M = mag * static_cast<double>(sc);
  const double Ma = hd::abs(M);
  if (!hd::is_finite(v) || !hd::is_finite(Ma)) {
    bits = round_bits(v, bf16);
    return true;
  }
  const double err = static_cast<double>(H + 8) * 0x1p-52 * Ma + 0x1p-50 * hd::abs(v);
  bits = round_bits(v, bf16);
  return round_bits(v - err, bf16) == bits && round_bits(v + err, bf16) == bits;
}

}  // namespace dsa::engines::logits::core
