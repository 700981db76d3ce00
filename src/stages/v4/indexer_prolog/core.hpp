// v4.indexer_prolog's per-row math as DSA_HD functions: the one definition cpu.cpp and cuda.cu both run (contract way
// 3: fixed operation order per row / element; exact steps in fp64). Plain C++17 without libm (numerics/hd_ops.hpp,
// half_core.hpp), so nvcc compiles it for the device. The Bug variants (selftest mutants) run on the CPU only; they
// are parameters here so that there is one copy of the math.
//   dynamic_quant_int8   the shared int8 block quantizer (engines/quant): amax, scale = fl32(amax * fl32(1/127)),
//                        codes rint(fl32(x * fl32(127 / amax)))
//   a3_weight            fp16(bf16(fl32(w * fl32(0.011048543456039806))))
//   the q_pre path, per head row of D values (cpu.cpp rotate_row is the sequence of the three steps):
//     rope_row   the bf16 RoPE output r and the ends [lo, hi] of what a kernel with the fp32 error may produce,
//                all bf16 values, stored as bf16 bits
//     row_stats  W = sum (hi - lo), A = sum max(|lo|, |hi|) in index order, and whether every fp32 partial sum of
//                such values is exact
//     prep_row   the two above, and for fwht the fp32 FWHT of r (fixed butterfly order, numerics/hadamard.hpp)
//     rot_elem   output i: the Hadamard (fwht: the fp32 FWHT values f, computed beforehand; ascend: the exact
//                +-1 sums in index order), its interval, the final rounding and the bound
#pragma once
#include <cstdint>

#include "engines/quant/quant_core.hpp"
#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"
#include "numerics/hadamard.hpp"

namespace dsa::v4::indexer_prolog {

enum class AmaxZero { scale1, scale0 };
enum class HadamardKind { ascend, fwht };
// Known bugs the selftest mutants reproduce through the reference's own code path (never set by a dump).
enum class Bug { none, scale_div127, codes_trunc, weights_unscaled, rope_neox, no_hadamard_scale,
                 // kernel vllm-cuda (vllm_q_row): RoPE skipped, the Hadamard applied, the q scale not folded into the
                 // weights (stored apart), the weights divided by it, amax over the un-rotated rope dims
                 vq_no_rope, vq_hadamard, vq_scale_not_folded, vq_weights_div, vq_amax_pre_rope };

// fl32(0.011048543456039806) = fl32(128^-0.5 / 64) = 0x3C3504F3 as a bit pattern, so no compiler folds the constant
// differently (tests/cpp/test_ref_v4.cpp checks it, and quant::inv127_f32, against the expressions).
DSA_HD inline float a3_weight_scale_f32() { return hd::from_bits32(0x3C3504F3u); }

// dynamic_quant_int8 of n bf16 values: the shared int8 block quantizer (engines/quant/quant_core.hpp) with the
// amax = 0 rule of attr amax_zero and the selftest's planted bugs; writes n codes, returns the fp32 scale (before
// its fp16 cast).
DSA_HD inline float dynamic_quant_int8(const std::uint16_t* x, std::int64_t n, AmaxZero az, std::int8_t* codes, Bug bug = Bug::none) {
  quant::Int8Rule r;
  r.zero_scale = az == AmaxZero::scale1 ? quant::Int8ZeroScale::one : quant::Int8ZeroScale::zero;
  r.scale_div127 = bug == Bug::scale_div127;
  r.codes_trunc = bug == Bug::codes_trunc;
  return quant::quantize_int8_block(x, n, r, codes);
}

// The fp16 scale as stored: RNE, a NaN scale as the CUDA-canonical 0x7FFF.
DSA_HD inline std::uint16_t scale_fp16(float s) { return hd::is_nan(s) ? std::uint16_t{0x7FFF} : halfcore::f32_to_fp16(s); }

// The A3 head weight of one bf16 weights_proj output value (fp16 bits).
DSA_HD inline std::uint16_t a3_weight(std::uint16_t w_bf16, Bug bug = Bug::none) {
  const float w = halfcore::bf16_to_f32(w_bf16);
  if (bug == Bug::weights_unscaled) return halfcore::f32_to_fp16(w);
  return halfcore::f32_to_fp16(halfcore::round_to_bf16(w * a3_weight_scale_f32()));
}

DSA_HD inline double gamma_n(std::int64_t n, double u) {
  return n <= 0 ? 0.0 : static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}
DSA_HD inline std::uint16_t bf16_of(double x) { return halfcore::f64_to_bf16(x); }
DSA_HD inline double val(std::uint16_t b) { return halfcore::bf16_to_f64(b); }

// RoPE on the last 64 dims of one head row x[D] (interleaved pairs; NeoX halves under Bug::rope_neox) with the
// token's cos/sin[32]: r = bf16(exact rotation); [lo, hi] = bf16 of the rotation -+ the kernel's fp32 error
// (3 2^-24 + 2 2^-53)(|x c| + |y s|); the nope dims as given. r, lo, hi [D] as bf16 bits.
DSA_HD inline void rope_row(const std::uint16_t* x, std::int64_t D, const float* cos_v, const float* sin_v, Bug bug, std::uint16_t* r,
                            std::uint16_t* lo, std::uint16_t* hi) {
  const std::int64_t R = 64, base = D - R;
  for (std::int64_t d = 0; d < base; ++d) r[d] = lo[d] = hi[d] = x[d];
  for (std::int64_t i = 0; i < R / 2; ++i) {
    const std::int64_t a = bug == Bug::rope_neox ? base + i : base + 2 * i;
    const std::int64_t b = bug == Bug::rope_neox ? base + i + R / 2 : base + 2 * i + 1;
    const double xa = val(x[a]), xb = val(x[b]), c = cos_v[i], sn = sin_v[i];
    const double ac = xa * c, bs = xb * sn, bc = xb * c, as = xa * sn;  // exact: 8 x 24 significant bits
    const double rho[2] = {ac - bs, bc + as}, mag[2] = {hd::abs(ac) + hd::abs(bs), hd::abs(bc) + hd::abs(as)};
    const std::int64_t at[2] = {a, b};
    for (int k = 0; k < 2; ++k) {
      const std::int64_t q = at[k];
      const double e = (3 * 0x1p-24 + 2 * 0x1p-53) * mag[k];
      r[q] = bf16_of(rho[k]);
      lo[q] = hd::is_finite(rho[k]) ? bf16_of(rho[k] - e) : r[q];
      hi[q] = hd::is_finite(rho[k]) ? bf16_of(rho[k] + e) : r[q];
    }
  }
}

struct RowStats {
  double W = 0, A = 0;      // total input uncertainty, sum of the largest magnitudes
  bool sums_exact = false;  // every fp32 partial sum of such inputs is exact, in any order
};

DSA_HD inline RowStats row_stats(const std::uint16_t* lo, const std::uint16_t* hi, std::int64_t D) {
  RowStats s;
  int lsb = 1 << 20;  // the lowest significant bit of any possible input: every partial sum is a multiple of 2^lsb
  for (std::int64_t d = 0; d < D; ++d) {
    const double l = val(lo[d]), h = val(hi[d]);
    s.W += h - l;
    s.A += hd::max(hd::abs(l), hd::abs(h));
    const double ends[2] = {l, h};
    for (const double v : ends)
      if (v != 0 && hd::is_finite(v)) {
        const int e = hd::frexp_exp(v) - 8;  // bf16: 8 significant bits
        lsb = e < lsb ? e : lsb;
      }
  }
  const int k = lsb + 24 < 1000 ? lsb + 24 : 1000;
  s.sums_exact = s.A < hd::pow2(k);
  return s;
}

// The per-row part of the q_pre path: rope_row into r/lo/hi [D], the row's stats, and for fwht the fp32 FWHT of r
// into f [D] (f unused for ascend).
DSA_HD inline RowStats prep_row(const std::uint16_t* x, std::int64_t D, const float* cos_v, const float* sin_v, HadamardKind kind,
                                Bug bug, std::uint16_t* r, std::uint16_t* lo, std::uint16_t* hi, float* f) {
  rope_row(x, D, cos_v, sin_v, bug, r, lo, hi);
  const RowStats st = row_stats(lo, hi, D);
  if (kind == HadamardKind::fwht) {
    for (std::int64_t d = 0; d < D; ++d) f[d] = static_cast<float>(val(r[d]));  // exact: bf16 values
    dsa::num::fwht_f32(f, D);
  }
  return st;
}

// bf16(fl32(v * s32)), v an fp32 value.
DSA_HD inline double final_round(double v, float s32, Bug bug) {
  const float fv = bug == Bug::no_hadamard_scale ? static_cast<float>(v) : static_cast<float>(v) * s32;
  return static_cast<double>(halfcore::round_to_bf16(fv));
}

// Output i of one row: h (fwht: f[i] of the fp32 FWHT of r; ascend: bf16 of the exact sum), its interval
// [hlo, hhi], out = bf16(fl32(h * s32)) and the bound = the largest distance to the roundings of the interval ends.
DSA_HD inline void rot_elem(std::int64_t i, std::int64_t D, HadamardKind kind, const std::uint16_t* r, const std::uint16_t* lo,
                            const std::uint16_t* hi, const float* f, const RowStats& st, float s32, Bug bug, std::uint16_t* out,
                            double* bound) {
  const double u32 = 0x1p-24, u64 = 0x1p-53;
  double h, hlo, hhi;
  if (kind == HadamardKind::fwht) {  // the same fp32 butterflies: exact unless an input is uncertain
    h = f[i];
    const double E = st.W > 0 ? st.W + (st.sums_exact ? 0.0 : 2 * gamma_n(7, u32) * (st.A + st.W)) : 0.0;
    hlo = h - E, hhi = h + E;
  } else {  // bf16(cube fp32 sum): the exact sum, its interval, the accumulation error
    double S = 0, Slo = 0, Shi = 0;
    for (std::int64_t d = 0; d < D; ++d) {
      const bool neg = hd::popcount(static_cast<std::uint64_t>(i & d)) & 1;
      S += neg ? -val(r[d]) : val(r[d]);
      Slo += neg ? -val(hi[d]) : val(lo[d]);
      Shi += neg ? -val(lo[d]) : val(hi[d]);
    }
    const double E = st.sums_exact ? 0.0 : (gamma_n(D - 1, u32) + gamma_n(D - 1, u64)) * st.A;
    h = val(bf16_of(S));
    hlo = hd::is_finite(S) ? val(bf16_of(Slo - E)) : h;
    hhi = hd::is_finite(S) ? val(bf16_of(Shi + E)) : h;
  }
  const double o = final_round(h, s32, bug);
  double olo = o, ohi = o;
  if (hd::is_finite(h) && (hlo != h || hhi != h)) {  // fp32 ends, widened by an ulp against the f64 -> f32 rounding
    olo = final_round(hd::next_toward(static_cast<float>(hlo), false), s32, bug);
    ohi = final_round(hd::next_toward(static_cast<float>(hhi), true), s32, bug);
  }
  *out = bf16_of(o);
  *bound = hd::is_finite(o) ? hd::max(o - olo, ohi - o) : 0.0;
}

// ---- kernel vllm-cuda: fused_indexer_q_rope_quant, FP8 branch (spec v4 §10 "Indexer q") ---------------------------
// One (token, head) row x [D = 128] bf16 at the token's position (cos / sin [32] fp32 of cos_sin_cache[pos]):
//   r = bf16(GPT-J interleaved RoPE of dims 64..127 in fp32) (rope_row: the exact value rounded once, and the ends
//       [lo, hi] an fp32 evaluation with or without FMA contraction may round to); dims 0..63 as given
//   amax = max(|x[0..64)|, |r[64..128)|);  s = 2^ceil(log2(div_rn(max(amax, 1e-4), 448)))   (quant::ScaleRule pow2 /
//       div / eps on amax 1e-4: quant_core.hpp scale_of)
//   q_fp8 = e4m3(div_rn(v, s)) (RNE; no clamp: |v / s| <= 448 by construction of s)
//   weights_out = fl32(fl32(fl32(fp32(w) * s) * softmax_scale) * head_scale)   (the scale folded, not stored)
// Acceptance (the "bound", value space, 0 = exact required): Triton's approximate log2 (lg2.approx, error < 2^-21
// relative, exact on powers of two) can move ceil(log2 t) by one when t lies within 2^-21 of (not on) a power of
// two, and the fp32 RoPE can round to
// the other bf16 neighbour when the exact value lies within the fp32 error of a bf16 tie (then an e4m3 tie may flip
// too). The scale candidates are the exact rule's at the ends of the possible amax, widened by the log2 error; an
// element's bound is the largest distance from the reference code to the codes of the possible values under the
// possible scales (saturating at 448 for a too small scale), the weight's the largest distance to the candidate
// folds. Nothing else is accepted: elements of rows without an uncertain value are exact.
DSA_HD inline quant::QuantParams vllm_q_quant() {
  quant::QuantParams qp;
  qp.scale = quant::ScaleRule{quant::ScaleRound::pow2, quant::ScaleOp::div, quant::EpsOn::amax, 1e-4f};
  qp.apply = quant::ScaleApply::div;
  qp.clamp = false;
  return qp;
}
// e4m3 of x saturated to +-448 (the candidates under a too small scale; Triton's conversion is satfinite).
DSA_HD inline std::uint8_t e4m3_sat(float x) { return fp8core::f32_to_e4m3(hd::is_nan(x) ? x : hd::clamp(x, -448.0f, 448.0f)); }
DSA_HD inline double e4m3_val(std::uint8_t c) { return static_cast<double>(halfcore::e4m3_to_f32(c)); }
// The scale for a possible amax a, with the approximate log2 moving t = a / 448 by a relative e (+-2^-21); an exact
// power of two t keeps its exact logarithm (lg2.approx is exact there). For bf16 amax, t is either a power of two or
// more than 2^-10 away from one, so the log2 widening never changes a scale on bf16 input: only a RoPE value on either
// side of an amax of 448 2^j does (then both scales are candidates).
DSA_HD inline float vllm_q_scale_near(float a, double e) {
  const quant::ScaleRule r = vllm_q_quant().scale;
  const float t = fp8core::fmax_ieee(a, r.eps) / 448.0f;
  if (fp8core::pow2_ceil(t) == t) return t;
  return fp8core::pow2_ceil(static_cast<float>(static_cast<double>(t) * (1.0 + e)));
}
DSA_HD inline float vllm_q_fold(float w, float s, float sm, float hs, Bug bug) {
  if (bug == Bug::vq_scale_not_folded) return (w * sm) * hs;
  if (bug == Bug::vq_weights_div) return ((w / s) * sm) * hs;
  return ((w * s) * sm) * hs;
}

// x [D] bf16 bits (D = 128), cos_v / sin_v [32]; w the head weight as fp32; r / lo / hi [D] scratch. Writes codes [D],
// bound [D], *wout and *wbound.
DSA_HD inline void vllm_q_row(const std::uint16_t* x, std::int64_t D, const float* cos_v, const float* sin_v, float w, float sm, float hs,
                              Bug bug, std::uint16_t* r, std::uint16_t* lo, std::uint16_t* hi, std::uint8_t* codes, double* bound,
                              float* wout, double* wbound) {
  if (bug == Bug::vq_no_rope) {
    for (std::int64_t d = 0; d < D; ++d) r[d] = lo[d] = hi[d] = x[d];
  } else {
    rope_row(x, D, cos_v, sin_v, bug == Bug::rope_neox ? Bug::rope_neox : Bug::none, r, lo, hi);
  }
  if (bug == Bug::vq_hadamard) {  // the Ascend / reference path's rotation: bf16(fp32 FWHT * 128^-0.5)
    float f[128];
    for (std::int64_t d = 0; d < D && d < 128; ++d) f[d] = halfcore::bf16_to_f32(r[d]);
    dsa::num::fwht_f32(f, D < 128 ? D : 128);
    const float s32 = dsa::num::hadamard_scale_f32(D);
    for (std::int64_t d = 0; d < D && d < 128; ++d) r[d] = lo[d] = hi[d] = halfcore::f32_to_bf16(f[d] * s32);
  }
  // amax of the reference values, and its possible range over [lo, hi] (NaN propagates)
  float amax = 0.0f, alo = 0.0f, ahi = 0.0f;
  bool nan = false;
  for (std::int64_t d = 0; d < D; ++d) {
    const std::uint16_t v = bug == Bug::vq_amax_pre_rope ? x[d] : r[d];
    const float a = hd::abs(halfcore::bf16_to_f32(v));
    const float l = halfcore::bf16_to_f32(lo[d]), h = halfcore::bf16_to_f32(hi[d]);
    const float mn = (l <= 0.0f && h >= 0.0f) ? 0.0f : (hd::abs(l) < hd::abs(h) ? hd::abs(l) : hd::abs(h));
    const float mx = hd::abs(l) > hd::abs(h) ? hd::abs(l) : hd::abs(h);
    nan |= a != a;
    amax = a > amax ? a : amax;
    alo = mn > alo ? mn : alo;
    ahi = mx > ahi ? mx : ahi;
  }
  if (bug == Bug::vq_amax_pre_rope) alo = ahi = amax;
  const quant::QuantParams qp = vllm_q_quant();
  const quant::BlockScale b = quant::block_scale(nan ? fp8core::quiet_nan() : amax, qp);
  const float s = b.s;
  const float smin = nan ? s : vllm_q_scale_near(alo, -0x1p-21), smax = nan ? s : vllm_q_scale_near(ahi, 0x1p-21);
  for (std::int64_t d = 0; d < D; ++d) {
    codes[d] = quant::encode(halfcore::bf16_to_f32(r[d]), b, qp);
    double bd = 0.0;
    if (!nan && (lo[d] != hi[d] || smin != smax)) {
      const double ref = e4m3_val(codes[d]);
      const std::uint16_t vs[2] = {lo[d], hi[d]};
      const float ss[2] = {smin, smax};
      for (const std::uint16_t v : vs)
        for (const float sc : ss) bd = hd::max(bd, hd::abs(e4m3_val(e4m3_sat(halfcore::bf16_to_f32(v) / sc)) - ref));
    }
    bound[d] = bd;
  }
  *wout = vllm_q_fold(w, s, sm, hs, bug);
  double wb = 0.0;
  if (!nan && smin != smax) {
    const float ss[2] = {smin, smax};
    for (const float sc : ss) wb = hd::max(wb, hd::abs(static_cast<double>(vllm_q_fold(w, sc, sm, hs, bug)) - static_cast<double>(*wout)));
  }
  *wbound = hd::is_finite(wb) ? wb : 0.0;
}

}  // namespace dsa::v4::indexer_prolog
