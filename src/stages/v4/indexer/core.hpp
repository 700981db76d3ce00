// v4.indexer: the score and bound of one candidate for each variant (stage.hpp has the formulas), the one scorer
// that cpu.cpp runs on the host and cuda.cu on the device (determinism contract way 3: the same fp64 operations in the same order; int8 dots are exact int32 in
// any order). DSA_HD, plain C++17.
//   ascend-a3:           wq = a3_wq(w16, qs16) per (row, head); per head in turn a3_head(acc, I_h, wq_h) with the
//                        exact int32 dot I_h; then a3_finish(acc, ks16) -> score, bound
//   vllm-cuda, ref-bf16: per head in turn fl_head(acc, dot_h, abs_h, w_h) after dot64; then fl_finish(acc, ks)
// Scores and bounds leave the core with NaN canonical (ascend_li_core.hpp).
#pragma once
#include <cstdint>

#include "engines/ascend_li/ascend_li_core.hpp"
#include "engines/logits/torch_logits_core.hpp"
#include "numerics/half_core.hpp"

namespace dsa::v4::indexer::core {

namespace li = dsa::engines::ascend_li::core;
namespace hc = dsa::halfcore;

// fp16 -> f64 (exact).
DSA_HD inline double fp16_f64(std::uint16_t h) { return static_cast<double>(hc::fp16_to_f32(h)); }
// x rounded once to fp16 and back (f64).
DSA_HD inline double round_fp16(double x) { return fp16_f64(hc::f64_to_fp16(x)); }

// The scoring arithmetic of the producer (stage.hpp): ascend-a3, vllm-cuda, ref (the reference model's bf16).
enum class Variant { ascend_a3, vllm_cuda, ref_bf16 };

// ---- ascend-a3 -------------------------------------------------------------------------------------------------
struct A3Consts {
  double g = 0;                       // (g(H-1, 2^-24) + g(H-1, 2^-53)) (1 + 2^-20)
  bool relu_after_weighting = false;  // Bug::relu_after_weighting (selftest mutant, CPU only)
  bool no_2pow10 = false;             // Bug::no_2pow10 (selftest mutant, CPU only)
};
struct A3Acc {
  double L = 0, A = 0;
};

// wq = fp16(w16 qs16): the exact product rounded once (no_query_scale: Bug::no_query_scale, wq = w16).
DSA_HD inline double a3_wq(std::uint16_t w16, std::uint16_t qs16, bool no_query_scale) {
  return round_fp16(fp16_f64(w16) * (no_query_scale ? 1.0 : fp16_f64(qs16)));  // the product is exact in f64
}

// Head h: s = fp16(relu(I) 2^-10), L += wq s (exact: fp16 x fp16), A += |wq s|; fixed order h = 0..H-1.
DSA_HD inline void a3_head(A3Acc& a, std::int32_t I, double wq, const A3Consts& k) {
  const double x = static_cast<double>(I);
  double prod;
  if (k.relu_after_weighting) {
    prod = li::max0(wq * round_fp16(x * 0x1.0p-10));
  } else {
    const double r = k.no_2pow10 ? li::max0(x) : li::max0(x) * 0x1.0p-10;  // exact
    prod = wq * round_fp16(r);
  }
  a.L += prod;
  a.A += hd::abs(prod);
}

// score = L ks, bound = g A |ks| + 2^-23 |score| (0 for a non-finite score). |score| 2^-23 is exact: a nonzero
// |score| >= 2^-48 2^-24 (sums of fp16 x fp16 products times an fp16 scale).
DSA_HD inline void a3_finish(const A3Acc& a, double ks, const A3Consts& k, double& score, double& bound) {
  const double sc = a.L * ks;
  score = li::canonical(sc);
  bound = hd::is_finite(sc) ? li::canonical(k.g * a.A * hd::abs(ks) + hd::abs(sc) * 0x1p-23) : 0.0;
}

// ---- vllm-cuda, ref-bf16 ---------------------------------------------------------------------------------------
struct FlConsts {
  bool ref = false;     // ref-bf16 (else vllm-cuda)
  double g_dot = 0;     // g(D-1, 2^-24)
  double e_dot = 0;     // ref: g(D-1, 2^-24) + g(D-1, 2^-53); vllm: 2^-10 + g(D-1, 2^-53)
  double ubf = 0;       // 2^-8
  double u32 = 0;       // 2^-24
  double g_head = 0;    // g(H-1, 2^-24) + g(H-1, 2^-53)
  bool relu_after_weighting = false;  // Bug::relu_after_weighting (selftest mutant, CPU only)
  // vllm-cuda: the logits may come from DeepGEMM (the envelope above) or, where DeepGEMM is absent, from vLLM's torch
  // fallback fp8_mqa_logits_torch (bf16 head scores): its bound is the one indexer.logits_ragged judges kernel
  // vllm-torch by (engines/logits/torch_logits_core.hpp); a candidate's band is the larger of the two.
  dsa::engines::logits::torch_core::Consts torch;
};
struct FlAcc {
  double L = 0, err = 0, mag = 0;
};

// Head h with dot I = q_h . k_j and A = sum_d |q_hd k_jd| (dot64): L += w relu(I) (fixed order h = 0..H-1); the
// kernel's dot error e (ref: fp32 dot rounded to bf16; vllm: the fp8 WGMMA envelope 2^-10 A) plus the reference's
// own f64 sum, and the product's rounding (bf16 tensor for ref-bf16, fp32 otherwise).
DSA_HD inline void fl_head(FlAcc& a, double I, double A, double w, const FlConsts& k) {
  const double r = li::max0(I), aw = hd::abs(w);
  a.L += k.relu_after_weighting ? li::max0(w * I) : w * r;
  const double e = k.ref ? k.e_dot * A + k.ubf * (hd::abs(I) + k.g_dot * A) : k.e_dot * A;
  const double up = k.ref ? k.ubf : k.u32;
  a.err += aw * e + up * aw * (r + e);
  a.mag += aw * (r + e) * (1 + up);
}

// u = err + g_head mag (1 + 2^-24) (+ 2^-8 (|L| + u) for the bf16 sum of ref-bf16), then the fp32 multiply by the
// key scale ks (1 for ref-bf16): score = L ks, bound = (u |ks| + 2^-24 |score|) (1 + 2^-20), 0 for a non-finite score.
DSA_HD inline void fl_finish(const FlAcc& a, double ks, const FlConsts& k, double& score, double& bound) {
  double u = a.err + k.g_head * a.mag * (1 + k.u32);
  if (k.ref) u += k.ubf * (hd::abs(a.L) + u);
  const double L = a.L * ks;
  u = u * hd::abs(ks) + k.u32 * hd::abs(L);
  score = li::canonical(L);
  bound = hd::is_finite(L) ? li::canonical(u * (1.0 + 0x1p-20)) : 0.0;
}

// ---- the per-candidate body (one thread of cuda.cu; cpu.cpp runs it for every candidate) -------------------------
// Everything the scorer reads (host pointers; cuda.cu passes the kernel a copy with device pointers): the rows, weights (a3: wq = a3_wq(w16, qs16); else the weights widened exactly) and
// cache geometry of PagedRows, and the members below.
struct ScoreJob : li::PagedRows {
  Variant variant = Variant::ascend_a3;
  const void* query = nullptr;      // [T, H, D]: int8 (a3), e4m3 (vllm), bf16 (ref)
  const void* key = nullptr;        // [key_slots, D] (the PA_BSND cache flattened), the query's kind
  const void* key_scale = nullptr;  // [key_slots]: fp16 bits (a3), f32 (vllm), unused (ref)
  bool no_key_scale = false;        // Bug::no_key_scale (selftest mutant, CPU only)
  A3Consts a3;
  FlConsts fl;
};

// The element kind of the float variants' codes: e4m3 (vllm-cuda), bf16 (ref-bf16).
DSA_HD constexpr li::Elem fl_elem(Variant v) { return v == Variant::vllm_cuda ? li::Elem::e4m3 : li::Elem::bf16; }

// Row t, position j < C: the score and bound of entry j (entry j at engines::ascend_li::key_slot; per head
// h = 0..H-1 in turn the a3 int8 dot and a3_head, or the float variants' dot64 of the exactly decoded codes and
// fl_head; then a3_finish / fl_finish with the key scale), or -inf / 0 (score_buffers) for j >= nvis.
// `e` is fl_elem(variant) (a compile-time constant in the kernels).
DSA_HD inline void score_thread(const ScoreJob& d, li::Elem e, std::int64_t t, std::int64_t j, double& score, double& bound) {
  namespace lc = li;
  using i64 = std::int64_t;
  if (j >= d.row_nvis[t]) {
    score = lc::neg_inf();
    bound = 0.0;
    return;
  }
  const i64 slot = d.slot(t, j);
  if (d.variant == Variant::ascend_a3) {
    const std::int8_t* q = static_cast<const std::int8_t*>(d.query) + t * d.H * d.D;
    const std::int8_t* k = static_cast<const std::int8_t*>(d.key) + slot * d.D;
    A3Acc acc;
    for (i64 h = 0; h < d.H; ++h) {
      const std::int8_t* qh = q + h * d.D;
      std::int32_t I = 0;  // |I| <= D 2^14 < 2^31 (parse: D <= 2^16): exact in any order
      bool done = false;
#if defined(__CUDA_ARCH__)
      if (d.D % 4 == 0) {  // every row then starts on a 4-byte boundary (cudaMalloc'd bases)
        const int* qw = reinterpret_cast<const int*>(qh);
        const int* kw = reinterpret_cast<const int*>(k);
        for (i64 x = 0; x < d.D / 4; ++x) I = __dp4a(qw[x], kw[x], I);
        done = true;
      }
#endif
      if (!done) {
#if !defined(__CUDA_ARCH__) && defined(_OPENMP)
#pragma omp simd reduction(+ : I)
#endif
        for (i64 x = 0; x < d.D; ++x) I += static_cast<std::int32_t>(qh[x]) * static_cast<std::int32_t>(k[x]);
      }
      a3_head(acc, I, d.weights[t * d.H + h], d.a3);
    }
    a3_finish(acc, d.no_key_scale ? 1.0 : fp16_f64(static_cast<const std::uint16_t*>(d.key_scale)[slot]), d.a3, score, bound);
    return;
  }
  const i64 q0 = t * d.H * d.D, k0 = slot * d.D;
  const void* q = d.query;
  const void* key = d.key;
  namespace tc = dsa::engines::logits::torch_core;
  const double ks = d.fl.ref || d.no_key_scale ? 1.0 : static_cast<double>(static_cast<const float*>(d.key_scale)[slot]);
  FlAcc acc;
  tc::Acc tacc;
  for (i64 h = 0; h < d.H; ++h) {
    const i64 qh = q0 + h * d.D;
    double s, a;
    lc::dot64([=](i64 x) { return lc::widen(q, e, qh + x); }, [=](i64 x) { return lc::widen(key, e, k0 + x); }, d.D, s, a);
    fl_head(acc, s, a, d.weights[t * d.H + h], d.fl);
    if (d.variant == Variant::vllm_cuda) tc::head(tacc, s, a, d.weights[t * d.H + h], ks, d.fl.torch);
  }
  fl_finish(acc, ks, d.fl, score, bound);
  // vllm-cuda: the torch fallback's bound, plus the reference's own f64 evaluation (< 2^-40 of the magnitude).
  if (d.variant == Variant::vllm_cuda && bound != 0.0)
    bound = hd::max(bound, li::canonical((tc::finish(tacc, d.fl.torch) + 0x1p-40 * tacc.mag) * (1.0 + 0x1p-20)));
}

}  // namespace dsa::v4::indexer::core
