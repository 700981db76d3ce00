// attn.v4_out's per-output math as DSA_HD functions: the one definition cuda.cu runs and cpu.cpp's blocked GEMMs
// reproduce (contract way 3: exact products, three fma chains in index order from +0 per output — the value, the
// magnitude sum of |products| and the carried bound sum of |w| M — then one bf16 rounding). Each chain is a dot
// product, so cpu.cpp runs them as attn::gemm_qk (engines/sparse_attn: every SIMD path keeps each element's chain)
// and the test "attn.v4_out: the blocked CPU GEMMs equal core.hpp's element functions" holds them to these bits. Plain
// C++17 without libm (numerics/hd_ops.hpp, half_core.hpp), so nvcc compiles it for the device. The Bug variants
// (selftest mutants) run on the CPU only; they are parameters here so that there is one copy of the math.
//   rot_elem   o_rot[t, h, d]: the inverse rotation of a rope dim (or a copy), its bound
//   lora_elem  o_lora[t, g, r] = sum_k o_rot[t, group g, k] wo_a[g R + r, k] from the reference's o_rot, bound carried
//   out_elem   output[t, d] = sum_j o_lora[t, j] wo_b[d, j] from the reference's o_lora, bound carried
#pragma once
#include <cstdint>

#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::attn::v4_out {

// Known bugs the selftest mutants reproduce through the reference's own code path (never set by a dump).
enum class Bug {
  none,
  forward_rope,      // sin not negated: rotated a second time instead of de-rotated
  no_inverse_rope,   // the rope dims left as they are
  neox_pairs,        // pairs (i, i + 32) instead of (2i, 2i+1) (B1 shape)
  rope_first_dims,   // the rotation applied to dims [0, rope_dim) instead of the last ones
  prev_row_table,    // the cos/sin row of the previous query row (position p - 1)
  groups_permuted,   // group g multiplied by wo_a's block of group g + 1
  heads_strided,     // group g = heads {g, g + G, ...} instead of a contiguous block
};

// The shapes (trivially copyable: passed to kernels by value). Ka = N D / G, Kb = G R.
struct Dims {
  std::int64_t T = 0, N = 0, D = 0, rope = 64, G = 8, R = 0, dim = 0;
};

// Half an ulp of bf16 at magnitude v >= 0 (the largest error of one RNE rounding of a value of magnitude <= v):
// 2^(ilogb(v) - 8), 2^-134 below the normal range (and for NaN), inf for inf.
DSA_HD inline double halfulp_bf16(double v) {
  if (!(v >= 0x1p-126)) return 0x1p-134;
  if (!hd::is_finite(v)) return v;
  return hd::pow2(hd::ilogb(v) - 8);
}

// Output f: the value rounded once to bf16 and its bound M = halfulp(|val| + err) + err (0 for a non-finite value).
DSA_HD inline void put(std::uint16_t* v, double* m, std::int64_t f, double val, double err) {
  v[f] = halfcore::f64_to_bf16(val);
  m[f] = hd::is_finite(val) ? halfulp_bf16(hd::abs(val) + err) + err : 0.0;
}

// Flat index into [T, N, D] of group g's k-th input element for token t (contiguous head blocks, or strided under
// Bug::heads_strided).
DSA_HD inline std::int64_t group_elem(const Dims& p, std::int64_t t, std::int64_t g, std::int64_t k, Bug bug) {
  const std::int64_t hpg = p.N / p.G;
  const std::int64_t h = bug == Bug::heads_strided ? (k / p.D) * p.G + g : g * hpg + k / p.D;
  return (t * p.N + h) * p.D + k % p.D;
}

// o_rot[t, h, d] from o [T, N, D] bf16 bits and the cos / sin rows [T, rope]: inverse RoPE of the last `rope` dims
// (or the first ones under a Bug), interleaved pairs; the other dims copied (bound 0: bytes-exact).
DSA_HD inline void rot_elem(const Dims& p, const std::uint16_t* ob, const float* cf, const float* sf, std::int64_t t, std::int64_t h,
                            std::int64_t d, Bug bug, std::uint16_t* rot, double* rot_m) {
  const std::int64_t rope = p.rope, nope = p.D - rope;
  const std::int64_t tt = bug == Bug::prev_row_table && t > 0 ? t - 1 : t;
  const std::int64_t r0 = bug == Bug::rope_first_dims ? 0 : nope;
  const double sgn = bug == Bug::forward_rope ? -1.0 : 1.0;
  const std::int64_t f0 = (t * p.N + h) * p.D;
  const std::uint16_t* x = ob + f0;
  const double xd = halfcore::bf16_to_f64(x[d]);
  if (d < r0 || d >= r0 + rope || bug == Bug::no_inverse_rope) {
    put(rot, rot_m, f0 + d, xd, 0.0);
    rot_m[f0 + d] = 0.0;  // a copy: bytes-exact
    return;
  }
  const std::int64_t i = d - r0;
  // partner dim and sign: interleaved pairs (2j, 2j+1), or NeoX halves under a Bug
  const std::int64_t half = rope / 2;
  const std::int64_t j = bug == Bug::neox_pairs ? (i < half ? i + half : i - half) : (i % 2 == 0 ? i + 1 : i - 1);
  const bool first = bug == Bug::neox_pairs ? i < half : i % 2 == 0;
  const double xp = halfcore::bf16_to_f64(x[r0 + j]);
  const double cv = cf[tt * rope + i], sv = sgn * sf[tt * rope + i];
  const double p1 = xd * cv, p2 = xp * sv;  // exact: 8 x 24 significant bits
  const double v = first ? p1 + p2 : p1 - p2;
  put(rot, rot_m, f0 + d, v, (0x1p-22 + 0x1p-52) * (hd::abs(p1) + hd::abs(p2)));
}

// o_lora[t, g, r] from the reference's o_rot bits and bounds [T, N, D] and wo_a [G R, Ka] bf16 bits; gKa = the
// any-order fp32 summation factor of Ka products plus the reference's own f64 chain (cpu.cpp).
DSA_HD inline void lora_elem(const Dims& p, const std::uint16_t* rot, const double* rot_m, const std::uint16_t* wab, double gKa, std::int64_t t,
                             std::int64_t g, std::int64_t r, Bug bug, std::uint16_t* ua, double* ua_m) {
  const std::int64_t Ka = p.N * p.D / p.G;
  const std::int64_t gw = bug == Bug::groups_permuted ? (g + 1) % p.G : g;
  const std::uint16_t* w = wab + (gw * p.R + r) * Ka;
  double s = 0, sa = 0, sp = 0;
  for (std::int64_t k = 0; k < Ka; ++k) {
    const std::int64_t e = group_elem(p, t, g, k, bug);
    const double wk = halfcore::bf16_to_f64(w[k]), ak = halfcore::bf16_to_f64(rot[e]);
    s = hd::fma(ak, wk, s);
    sa = hd::fma(hd::abs(ak), hd::abs(wk), sa);
    sp = hd::fma(hd::abs(wk), rot_m[e], sp);
  }
  put(ua, ua_m, (t * p.G + g) * p.R + r, s, gKa * sa + sp * (1 + 0x1p-40));
}

// output[t, d] from the reference's o_lora bits and bounds [T, G R] and wo_b [dim, G R] bf16 bits.
DSA_HD inline void out_elem(const Dims& p, const std::uint16_t* ua, const double* ua_m, const std::uint16_t* wbb, double gKb, std::int64_t t,
                            std::int64_t d, std::uint16_t* y, double* y_m) {
  const std::int64_t Kb = p.G * p.R;
  const std::uint16_t* w = wbb + d * Kb;
  double s = 0, sa = 0, sp = 0;
  for (std::int64_t j = 0; j < Kb; ++j) {
    const double wj = halfcore::bf16_to_f64(w[j]), uj = halfcore::bf16_to_f64(ua[t * Kb + j]);
    s = hd::fma(uj, wj, s);
    sa = hd::fma(hd::abs(uj), hd::abs(wj), sa);
    sp = hd::fma(hd::abs(wj), ua_m[t * Kb + j], sp);
  }
  put(y, y_m, t * p.dim + d, s, gKb * sa + sp * (1 + 0x1p-40));
}

}  // namespace dsa::attn::v4_out
