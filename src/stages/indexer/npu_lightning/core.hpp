// indexer.npu_lightning: the score and bound of one candidate (stage.hpp has the formulas), the one scorer that cpu.cpp
// runs on the host and cuda.cu on the device (determinism contract way 3: the same fp64 operations in the same order;
// DSA_HD, plain C++17).
//   per head h in turn (after its dot64):  head(acc, dot_h, abs_h, w_h)
//   then                                    finish(acc) -> score, bound (NaN canonical)
//   score_thread                            the per-candidate body: the key's slot, the dots, head, finish
#pragma once
#include <cstdint>

#include "engines/ascend_li/ascend_li_core.hpp"

namespace dsa::indexer::npu_lightning::core {

namespace li = dsa::engines::ascend_li::core;

// Per-case constants (consts() in cpu.cpp computes them from H, D and the variant).
struct Consts {
  double g_dot = 0;    // g(D-1, 2^-24) + g(D-1, 2^-53)
  double u_sum = 0;    // 2^-24 + 2^-53
  double g_head = 0;   // (g(depth, 2^-24) + g(H-1, 2^-53)) (1 + 2^-24)
  double tiny = 0;     // (D H + 2 H + 2) 2^-149
  bool a950 = false;   // variant=ascend-950: the bf16 sort key
  bool relu_after_weighting = false;  // Bug::relu_after_weighting (selftest mutant, CPU only)
};

struct Acc {
  double L = 0, werr = 0, wmag = 0;
};

// Head h: L += w relu(dot) (fixed order h = 0..H-1), werr += |w| e, wmag += |w| (r + e), e = g_dot abs.
DSA_HD inline void head(Acc& a, double dot, double abs, double w, const Consts& k) {
  const double r = li::max0(dot), e = k.g_dot * abs, aw = hd::abs(w);
  a.L += k.relu_after_weighting ? li::max0(w * dot) : w * r;
  a.werr += aw * e;
  a.wmag += aw * (r + e);
}

// u = werr + (2^-24 + 2^-53) W + g_head W + tiny (+ 2^-8 (|L| + u) for ascend-950), times (1 + 2^-20); bound 0 for a
// non-finite score. (|L| + u) 2^-8 is exact: u >= tiny keeps it far above the f64 subnormals.
DSA_HD inline void finish(const Acc& a, const Consts& k, double& score, double& bound) {
  double u = a.werr + k.u_sum * a.wmag + k.g_head * a.wmag + k.tiny;
  if (k.a950) u += (hd::abs(a.L) + u) * 0x1p-8;
  score = li::canonical(a.L);
  bound = hd::is_finite(a.L) ? li::canonical(u * (1.0 + 0x1p-20)) : 0.0;
}

// ---- the per-candidate body (one thread of cuda.cu; cpu.cpp runs it for every candidate) -------------------------
// Everything the scorer reads (host pointers; cuda.cu passes the kernel a copy with device pointers): the rows,
// weights (widened exactly, engines::ascend_li::widen) and cache geometry of PagedRows, and the members below.
struct ScoreJob : li::PagedRows {
  const void* query = nullptr;  // [T, H, D] bf16 / fp16 bits (elem)
  const void* key = nullptr;    // [key_slots, D] (the PA_BSND cache flattened), the query's dtype
  li::Elem elem = li::Elem::bf16;
  Consts k;
};

// Row t, position j < C: the score and bound of key j (key j at engines::ascend_li::key_slot, per head h = 0..H-1 the
// dot64 of the exactly decoded codes then head, finish), or -inf / 0 (score_buffers) for j >= nvis.
DSA_HD inline void score_thread(const ScoreJob& d, li::Elem e, std::int64_t t, std::int64_t j, double& score, double& bound) {
  namespace lc = li;
  using i64 = std::int64_t;
  if (j >= d.row_nvis[t]) {
    score = lc::neg_inf();
    bound = 0.0;
    return;
  }
  const i64 slot = d.slot(t, j);
  const i64 q0 = t * d.H * d.D, k0 = slot * d.D;
  const void* q = d.query;
  const void* key = d.key;
  Acc acc;
  for (i64 h = 0; h < d.H; ++h) {
    const i64 qh = q0 + h * d.D;
    double s, a;
    lc::dot64([=](i64 x) { return lc::widen(q, e, qh + x); }, [=](i64 x) { return lc::widen(key, e, k0 + x); }, d.D, s, a);
    head(acc, s, a, d.weights[t * d.H + h], d.k);
  }
  finish(acc, d.k, score, bound);
}

}  // namespace dsa::indexer::npu_lightning::core
