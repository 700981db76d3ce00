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

void RowEngine::run(double sm) {
  const std::int64_t H = H_, D = D_, dv = dv_, n = n_, Hp = Hp_, ldk = ldk_;
  O_.assign(static_cast<std::size_t>(H * dv), 0.0);
  M_.assign(static_cast<std::size_t>(H * dv), 0.0);
  if (n == 0) {
    for (auto& r : res_) r.m = -kInf, r.lse = -kInf, r.lonely = true;
    return;
  }
  // The key norms for the bound: each key's sum of squares in increasing d (mul then add); their max (NaN sticky).
  s2_.resize(static_cast<std::size_t>(n));
  row_key_norms(K_.data(), ldk, n, D, s2_.data());
  double kmax2 = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const double s2 = s2_[static_cast<std::size_t>(t)];
    kmax2 = s2 > kmax2 || s2 != s2 ? s2 : kmax2;
  }
  // Heads in blocks of 64: the score workspace St stays topk x 64 whatever h_q is (the per-element order is unchanged).
  const std::int64_t HB = 64, ldo = odd_lines(dv);
  Oa_.resize(static_cast<std::size_t>(Hp * ldo));
  Ma_.resize(static_cast<std::size_t>(Hp * ldo));
  hm_.resize(HB), hz_.resize(HB), hq_.resize(HB), hl_.resize(HB), hnan_.resize(HB), hkeep_.resize(HB);
  const double gD = gamma_n(static_cast<double>(D));
  for (std::int64_t h0 = 0; h0 < Hp; h0 += HB) {
    const std::int64_t hb = std::min(HB, Hp - h0), lds = odd_lines(hb);
    // Qt[d][h]: the block's queries, one row of hb heads per dim (heads past H zero); |q_h|^2 down each column in
    // increasing d (mul then add).
    Qt_.resize(static_cast<std::size_t>(D * hb));
    for (std::int64_t h = 0; h < hb; ++h)
      for (std::int64_t d = 0; d < D; ++d)
        Qt_[static_cast<std::size_t>(d * hb + h)] = h0 + h < H ? Q_[static_cast<std::size_t>((h0 + h) * D + d)] : 0.0;
    double* q2 = hq_.data();
    std::fill(q2, q2 + hb, 0.0);
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t h = 0; h < hb; ++h) q2[h] += Qt_[static_cast<std::size_t>(d * hb + h)] * Qt_[static_cast<std::size_t>(d * hb + h)];
    S_.resize(static_cast<std::size_t>(n * lds));
    row_qk(K_.data(), ldk, n, Qt_.data(), hb, D, S_.data(), lds);
    row_scan(S_.data(), lds, n, hb, sm, hm_.data(), hz_.data(), hnan_.data());
    for (std::int64_t h = 0; h < hb; ++h) {
      hkeep_[static_cast<std::size_t>(h)] = 0;
      if (h0 + h >= H) continue;
      HeadResult& r = res_[static_cast<std::size_t>(h0 + h)];
      head_bounds(sm, gD, q2[h], kmax2, hz_[static_cast<std::size_t>(h)], hm_[static_cast<std::size_t>(h)], r);
      hkeep_[static_cast<std::size_t>(h)] = head_classify(hnan_[static_cast<std::size_t>(h)] != 0, hm_[static_cast<std::size_t>(h)], r);
    }
    row_exp(S_.data(), lds, n, hb, hm_.data(), hkeep_.data(), hl_.data());  // p = det_exp(z - m), L in key order
    for (std::int64_t h = 0; h < hb; ++h)
      if (hkeep_[static_cast<std::size_t>(h)]) head_lse(hl_[static_cast<std::size_t>(h)], res_[static_cast<std::size_t>(h0 + h)]);
    row_pv(S_.data(), lds, hb, n, K_.data(), ldk, dv, Oa_.data() + h0 * ldo, Ma_.data() + h0 * ldo, ldo);
  }
  for (std::int64_t h = 0; h < H; ++h) {
    const HeadResult& r = res_[static_cast<std::size_t>(h)];
    for (std::int64_t c = 0; c < dv; ++c) {
      double o = Oa_[static_cast<std::size_t>(h * ldo + c)], mg = Ma_[static_cast<std::size_t>(h * ldo + c)];
      head_finish_one(r, o, mg);
      O_[static_cast<std::size_t>(h * dv + c)] = o, M_[static_cast<std::size_t>(h * dv + c)] = mg;
    }
  }
}

}  // namespace dsa::attn
