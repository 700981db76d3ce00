// The exact core of the sparse attention stages (attn.sparse_mla_prefill, attn.sparse_mla_decode): one query row
// (all heads) against its selected keys, in fp64, in ONE fixed order of IEEE operations (determinism contract,
// architecture.md: "one fixed order shared by CPU and CUDA"):
//   s[h][t]   = sum_d q[h][d] * k[t][d]        fma chain in increasing d (the GEMM micro-kernels keep it per element)
//   z[h][t]   = sm_scale * s[h][t]             (natural-log units)
//   m[h]      = max_t z[h][t]                  (NaN propagates)
//   p[h][t]   = det_exp(z[h][t] - m[h]);  L[h] = sum_t p[h][t] in increasing t
//   o[h][c]   = (sum_t p[h][t] * v[t][c]) / L[h]   fma chain in increasing t, one division
//   lse[h]    = m[h] + det_log(L[h])
// Keys are the valid selections in index order, duplicates included (FlashMLA and its torch references weight a
// key that appears twice twice). The stages round o once to bf16 and lse / max_logits once to fp32.
//
// Error bound of FlashMLA's SM90 kernels (v32 spec §6.1/§6.2: bf16 WGMMA QK^T and PV with fp32 accumulation, online
// softmax in the log2 domain with ex2.approx (fast-math), P rounded to bf16 for PV, the running sum L of unrounded
// fp32 P, out = bf16(O * 1/L)). With u = 2^-23 per fp32 accumulation step (covers a truncating accumulator),
// g(n) = n u / (1 - n u), A_h = |q_h|_2 max_t |k_t|_2 >= sum_d |q_hd k_td| (Cauchy-Schwarz) and Z_h = max_t |z_ht|:
//   (1) each kernel exponent argument is off by at most
//         delta_h = sm * g(D) * A_h          (fp32 QK accumulation of exact bf16 products)
//                 + 2^-22 * Z_h              (fp32 scale multiply, max subtraction: three roundings of |x| <= 2 Z_h log2e)
//                 + 2^-21                    (ex2.approx relative error < 2^-22, as an exponent error)
//       so every normalized weight p_t / L of the kernel is within eta_h = e^(2 delta_h) - 1 (relative) of the exact one;
//   (2) out[h][c]: bf16(P) costs 2^-8 per weight, the PV and L fp32 sums g(n) each, the per-64-key online rescales
//       and 1/L (n/64 + 4) 2^-21, the final bf16 rounding 2^-8 |out| <= 2^-8 M. With M[h][c] = sum_t (p_t/L)|v_tc|
//       (>= |out|):   |out_kernel - out| <= M * (2^-7 + 1.5 eta_h + 2 g(n) + (n/64 + 4) 2^-21) + 2^-133;
//       a sink factor f = 1/(1 + e^(sink - lse)) (f <= 1) scales M and adds (eta_h/2 + 2^-20) f M;
//   (3) lse: delta_h + g(n) (sum of positive terms) + 2^-21 (lg2.approx) + 2^-22 (|lse| + |m|) (fp32 roundings);
//   (4) max_logits: sm * g(D) * A_h + 2^-22 |m|.
// Base-2 values (the 2025 prefill) multiply (3) and (4) by log2(e). The comparator's tolerance policy
// `derived-bound` (rtol 1) uses these bounds as the per-element M, so "max err/M" is the fraction of the bound used.
#pragma once
#include <cstdint>
#include <vector>

#include "engines/sparse_attn/sparse_attn_core.hpp"

namespace dsa::attn {

class RowEngine {
 public:
  // H heads of D dims, dv value dims (the first dv dims of a key; dv % 8 == 0), n selected keys.
  void reset(std::int64_t H, std::int64_t D, std::int64_t dv, std::int64_t n);
  double* q(std::int64_t h) { return Q_.data() + h * D_; }     // fill: q row h (D values)
  double* key(std::int64_t t) { return K_.data() + t * ldk_; }  // fill: key t (D values)
  // Runs the row; afterwards out(h)/mag(h) hold dv values (normalized o and M of (2) before the sink).
  void run(double sm_scale);
  const HeadResult& head(std::int64_t h) const { return res_[static_cast<std::size_t>(h)]; }
  const double* out(std::int64_t h) const { return O_.data() + h * dv_; }
  const double* mag(std::int64_t h) const { return M_.data() + h * dv_; }
  std::int64_t n() const { return n_; }
  // The results as a RowView (head(h), out(h), mag(h), out_rel(h), lse_bound(h)): what the stages read.
  RowView view() const { return RowView{H_, dv_, n_, res_.data(), O_.data(), M_.data(), nullptr}; }

 private:
  std::int64_t H_ = 0, D_ = 0, dv_ = 0, n_ = 0, Hp_ = 0, ldk_ = 0;
  std::vector<double> Q_, K_, Qt_, S_, Oa_, Ma_, O_, M_, s2_, hm_, hz_, hq_, hl_;
  std::vector<unsigned char> hnan_, hkeep_;
  std::vector<HeadResult> res_;
};

// The GEMM micro-kernel of v4_out and the V4 compressor's projections (attn_gemm.cpp: generic, AVX2 + FMA, AVX-512F;
// the same fma chain per element, so identical bits on every path). gemm_isa(): the best path of this CPU, capped by
// DSA_ATTN_ISA=generic|avx2|avx512; a path the CPU lacks falls back to generic.
// S[h][t] = sum_d Q[h][d] K[t][d] (d increasing), Q: Hp rows of D at stride ldq (Hp % 4 == 0; ldq < D means D),
// Kp: K packed in panels of 8 keys (Kp[(p*D + d)*8 + x] = K[8p+x][d]), S: Hp x np (np % 8 == 0).
enum class GemmIsa { generic, avx2, avx512 };
GemmIsa gemm_isa();
bool gemm_isa_supported(GemmIsa isa);
void gemm_qk(const double* Q, std::int64_t Hp, const double* Kp, std::int64_t np, std::int64_t D, double* S, GemmIsa isa = gemm_isa(),
             std::int64_t ldq = 0);

// The row engine's steps (row_kernels.cpp; generic / AVX2 / AVX-512 paths with identical bits), on hb heads at a time
// (hb % 8 == 0): keys row-major K[t * ldk + d] (t < n), queries packed Qt[d * hb + h], scores St[t * lds + h].
//   row_qk:   St[t][h] = sum_d K[t][d] Qt[d][h], an fma chain over d increasing from +0;
//   row_scan: St := z = sm * St; per head m = the max (strict >, in t order: NaN never taken), zmax = max |z|, nan =
//             some z is NaN;
//   row_exp:  St := p = det_exp(z - m[h]) where keep[h] (else +0); L[h] = the sum of p in t order from +0;
//   row_pv:   O[h * ldo + c] = sum_t p v, M[h * ldo + c] = sum_t p |v| (fma chains over t increasing), v = V[t * ldv + c],
//             c < dv (dv % 8 == 0); with accumulate, the chains continue from the O and M already there (a row's keys
//             in consecutive ranges give the bits of one call);
//   row_key_norms: s2[t] = sum_d K[t][d]^2 (mul, then add; d increasing).
void row_qk(const double* K, std::int64_t ldk, std::int64_t n, const double* Qt, std::int64_t hb, std::int64_t D, double* St, std::int64_t lds,
            GemmIsa isa = gemm_isa());
void row_scan(double* St, std::int64_t lds, std::int64_t n, std::int64_t hb, double sm, double* m, double* zmax, unsigned char* nan,
              GemmIsa isa = gemm_isa());
void row_exp(double* St, std::int64_t lds, std::int64_t n, std::int64_t hb, const double* m, const unsigned char* keep, double* L,
             GemmIsa isa = gemm_isa());
void row_pv(const double* Pt, std::int64_t ldp, std::int64_t hb, std::int64_t n, const double* V, std::int64_t ldv, std::int64_t dv, double* O,
            double* M, std::int64_t ldo, GemmIsa isa = gemm_isa(), bool accumulate = false);
void row_key_norms(const double* K, std::int64_t ldk, std::int64_t n, std::int64_t D, double* s2, GemmIsa isa = gemm_isa());

}  // namespace dsa::attn
