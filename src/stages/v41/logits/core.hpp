// v41.logits: the per-logit arithmetic cpu.cpp and cuda.cu share (determinism contract, way 3: one fixed sequence of
// IEEE fp64 operations, -ffp-contract=off / --fmad=false): the MXFP4 dequant and the head / dim sums in order.
// Plain C++17 with DSA_HD numerics only.
#pragma once
#include <cstdint>

#include "numerics/fp4_core.hpp"
#include "numerics/hd.hpp"

namespace dsa::v41::logits::core {

// Dim d of an MXFP4 row: codes (dim 2i in the low nibble; `swap`: read high-first) times the ue8m0 byte of d / 32.
DSA_HD inline double mx4(const std::uint8_t* codes, std::uint32_t sf, std::int64_t d, bool swap) {
  const int shift = (swap ? 1 - static_cast<int>(d % 2) : static_cast<int>(d % 2)) * 4;
  const std::uint8_t nib = static_cast<std::uint8_t>((codes[d / 2] >> shift) & 0xF);
  return static_cast<double>(fp4core::e2m1_to_f32(nib)) *
         static_cast<double>(fp4core::ue8m0_decode(static_cast<std::uint8_t>((sf >> (8 * (d / 32))) & 0xFF)));
}

struct Logit {
  double v, mag, wabs;  // sum_h w relu(dot), sum_h |w| sum_d |q k|, sum_h |w|
};

// One logit: q (H rows of D/2 code bytes, H packed scale words), w (H weights as doubles), k (D/2 code bytes, one
// packed scale word). no_relu / swap_k: the bugs the selftest reproduces.
DSA_HD inline Logit logit(const std::uint8_t* q, const std::uint32_t* qsf, const double* w, const std::uint8_t* k, std::uint32_t ksf,
                          std::int64_t H, std::int64_t D, bool no_relu, bool swap_k) {
  Logit o{0, 0, 0};
  for (std::int64_t h = 0; h < H; ++h) {
    double dot = 0, adot = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      const double prod = mx4(q + h * (D / 2), qsf[h], d, false) * mx4(k, ksf, d, swap_k);
      dot += prod;
      adot += prod < 0 ? -prod : prod;
    }
    const double rl = no_relu ? dot : (dot < 0 ? 0.0 : dot);  // NaN kept
    o.v += w[h] * rl;
    const double wa = w[h] < 0 ? -w[h] : w[h];
    o.mag += wa * adot;
    o.wabs += wa;
  }
  return o;
}

// The derived bound of a logit (stage.hpp): fp32 accumulation over D products and H heads, flushed tiny products, one
// output rounding of the kernel and one of the reference.
DSA_HD inline double bound(const Logit& l, std::int64_t H, std::int64_t D, bool bf16) {
  const double out_round = bf16 ? 0x1p-8 : 0x1p-24;
  const double av = l.v < 0 ? -l.v : l.v;
  return static_cast<double>(D + H + 2) * 0x1p-24 * l.mag + static_cast<double>(D) * l.wabs * 0x1p-126 + 2 * out_round * av;
}

}  // namespace dsa::v41::logits::core
