#include "engines/sparse_attn/sparse_attn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "numerics/det_math.hpp"

namespace dsa::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A row stride in doubles: at least w, a multiple of 8 (whole cache lines), an odd number of lines (a column slice
// then spreads over every L1 set).
std::int64_t odd_lines(std::int64_t w) {
  const std::int64_t l = std::max<std::int64_t>((w + 7) / 8, 1);
  return (l % 2 ? l : l + 1) * 8;
}

}  // namespace

void RowEngine::reset(std::int64_t H, std::int64_t D, std::int64_t dv, std::int64_t n) {
  H_ = H, D_ = D, dv_ = dv, n_ = n;
  Hp_ = (H + 7) / 8 * 8;
  ldk_ = odd_lines(D);
  Q_.assign(static_cast<std::size_t>(H * D), 0.0);
  K_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * ldk_));
  res_.assign(static_cast<std::size_t>(H), HeadResult{});
}

namespace {
// head_finish_one over one head's dv values, out of place (the head's case is loop-invariant, so the compiler
// unswitches it and the O / L, M / L loop is vectorized: one correctly rounded division each, the same bits).
__attribute__((target_clones("avx512f", "avx2", "default"))) void finish_head(const HeadResult& r, const double* oa, const double* ma,
                                                                              std::int64_t n, double* o, double* mg) {
  for (std::int64_t i = 0; i < n; ++i) {
    double x = oa[i], m = ma[i];
    head_finish_one(r, x, m);
    o[i] = x, mg[i] = m;
  }
}
}  // namespace

void RowEngine::run(double sm) {
  const std::int64_t H = H_, D = D_, dv = dv_, n = n_, Hp = Hp_, ldk = ldk_;
  O_.resize(static_cast<std::size_t>(H * dv));  // every element written below
  M_.resize(static_cast<std::size_t>(H * dv));
  if (n == 0) {
    std::fill(O_.begin(), O_.end(), 0.0);
    std::fill(M_.begin(), M_.end(), 0.0);
    for (auto& r : res_) r.m = -kInf, r.lse = -kInf, r.lonely = true;
    return;
  }
  // Heads in blocks of 64 (the per-element order does not depend on the blocking). Every head block's scores are held
  // at once (St of block b at S_ + b * n * lds), so the keys stream past once for QK and once for PV, in key blocks
  // that stay in L2 while every head block uses them.
  const std::int64_t HB = 64, nblk = (Hp + HB - 1) / HB, lds = odd_lines(std::min(HB, Hp)), ldo = odd_lines(dv);
  const std::int64_t KB = 128;  // keys a block: 128 x 576 doubles = 576 KiB
  Oa_.resize(static_cast<std::size_t>(Hp * ldo));
  Ma_.resize(static_cast<std::size_t>(Hp * ldo));
  hm_.resize(static_cast<std::size_t>(Hp)), hz_.resize(static_cast<std::size_t>(Hp)), hq_.resize(static_cast<std::size_t>(Hp));
  hl_.resize(static_cast<std::size_t>(Hp)), hnan_.resize(static_cast<std::size_t>(Hp)), hkeep_.resize(static_cast<std::size_t>(Hp));
  // Qt[d][h] per head block (block b at Qt_ + b * D * HB): one row of hb heads per dim (heads past H zero); |q_h|^2 down
  // each column in increasing d (mul then add).
  Qt_.resize(static_cast<std::size_t>(nblk * D * HB));
  std::fill(hq_.begin(), hq_.end(), 0.0);
  for (std::int64_t b = 0; b < nblk; ++b) {
    const std::int64_t h0 = b * HB, hb = std::min(HB, Hp - h0);
    double* qt = Qt_.data() + b * D * HB;
    for (std::int64_t h = 0; h < hb; ++h)
      for (std::int64_t d = 0; d < D; ++d) qt[d * hb + h] = h0 + h < H ? Q_[static_cast<std::size_t>((h0 + h) * D + d)] : 0.0;
    double* q2 = hq_.data() + h0;
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t h = 0; h < hb; ++h) q2[h] += qt[d * hb + h] * qt[d * hb + h];
  }
  // QK and the key norms for the bound (each key's sum of squares in increasing d, mul then add), key block by key block.
  S_.resize(static_cast<std::size_t>(nblk * n * lds));
  s2_.resize(static_cast<std::size_t>(n));
  for (std::int64_t t0 = 0; t0 < n; t0 += KB) {
    const std::int64_t nb = std::min(KB, n - t0);
    row_key_norms(K_.data() + t0 * ldk, ldk, nb, D, s2_.data() + t0);
    for (std::int64_t b = 0; b < nblk; ++b) {
      const std::int64_t hb = std::min(HB, Hp - b * HB);
      row_qk(K_.data() + t0 * ldk, ldk, nb, Qt_.data() + b * D * HB, hb, D, S_.data() + (b * n + t0) * lds, lds);
    }
  }
  double kmax2 = 0;  // their max (NaN sticky)
  for (std::int64_t t = 0; t < n; ++t) {
    const double s2 = s2_[static_cast<std::size_t>(t)];
    kmax2 = s2 > kmax2 || s2 != s2 ? s2 : kmax2;
  }
  const double gD = gamma_n(static_cast<double>(D));
  for (std::int64_t b = 0; b < nblk; ++b) {
    const std::int64_t h0 = b * HB, hb = std::min(HB, Hp - h0);
    double* St = S_.data() + b * n * lds;
    row_scan(St, lds, n, hb, sm, hm_.data() + h0, hz_.data() + h0, hnan_.data() + h0);
    for (std::int64_t h = h0; h < h0 + hb; ++h) {
      hkeep_[static_cast<std::size_t>(h)] = 0;
      if (h >= H) continue;
      HeadResult& r = res_[static_cast<std::size_t>(h)];
      head_bounds(sm, gD, hq_[static_cast<std::size_t>(h)], kmax2, hz_[static_cast<std::size_t>(h)], hm_[static_cast<std::size_t>(h)], r);
      hkeep_[static_cast<std::size_t>(h)] = head_classify(hnan_[static_cast<std::size_t>(h)] != 0, hm_[static_cast<std::size_t>(h)], r);
    }
    row_exp(St, lds, n, hb, hm_.data() + h0, hkeep_.data() + h0, hl_.data() + h0);  // p = det_exp(z - m), L in key order
    for (std::int64_t h = h0; h < h0 + hb; ++h)
      if (hkeep_[static_cast<std::size_t>(h)]) head_lse(hl_[static_cast<std::size_t>(h)], res_[static_cast<std::size_t>(h)]);
  }
  // PV with the magnitudes, key block by key block (each block's chains continue those of the blocks before it).
  for (std::int64_t t0 = 0; t0 < n; t0 += KB) {
    const std::int64_t nb = std::min(KB, n - t0);
    for (std::int64_t b = 0; b < nblk; ++b) {
      const std::int64_t h0 = b * HB, hb = std::min(HB, Hp - h0);
      row_pv(S_.data() + (b * n + t0) * lds, lds, hb, nb, K_.data() + t0 * ldk, ldk, dv, Oa_.data() + h0 * ldo, Ma_.data() + h0 * ldo, ldo,
             gemm_isa(), t0 > 0);
    }
  }
  for (std::int64_t h = 0; h < H; ++h)
    finish_head(res_[static_cast<std::size_t>(h)], Oa_.data() + h * ldo, Ma_.data() + h * ldo, dv, O_.data() + h * dv, M_.data() + h * dv);
}

}  // namespace dsa::attn
