#include "engines/sparse_attn/sparse_attn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "numerics/det_math.hpp"

namespace dsa::attn {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

void RowEngine::reset(std::int64_t H, std::int64_t D, std::int64_t dv, std::int64_t n) {
  H_ = H, D_ = D, dv_ = dv, n_ = n;
  Hp_ = (H + 3) / 4 * 4;
  np_ = (n + 7) / 8 * 8;
  Q_.assign(static_cast<std::size_t>(Hp_ * D), 0.0);
  K_.resize(static_cast<std::size_t>(std::max<std::int64_t>(n, 1) * D));
  res_.assign(static_cast<std::size_t>(H), HeadResult{});
}

void RowEngine::run(double sm) {
  const std::int64_t H = H_, D = D_, dv = dv_, n = n_, np = np_, Hp = Hp_;
  O_.assign(static_cast<std::size_t>(Hp * dv), 0.0);
  M_.assign(static_cast<std::size_t>(Hp * dv), 0.0);
  if (n == 0) {
    for (auto& r : res_) r.m = -kInf, r.lse = -kInf, r.lonely = true;
    return;
  }
  // Pack K^T panels (8 keys at a time: contiguous stores; zero keys past n) and the key norms for the bound: each
  // key's sum of squares in increasing d (mul then add), 8 keys' chains side by side on the packed panel.
  Kp_.resize(static_cast<std::size_t>(np * D));
  s2_.resize(static_cast<std::size_t>(np));
  for (std::int64_t p = 0; p < np / 8; ++p) {
    double* dst = Kp_.data() + p * D * 8;
    const std::int64_t nk = std::min<std::int64_t>(8, n - p * 8);
    for (std::int64_t d = 0; d < D; ++d)
      for (std::int64_t x = 0; x < 8; ++x) dst[d * 8 + x] = x < nk ? K_[static_cast<std::size_t>((p * 8 + x) * D + d)] : 0.0;
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (std::int64_t d = 0; d < D; ++d)
      for (int x = 0; x < 8; ++x) acc[x] += dst[d * 8 + x] * dst[d * 8 + x];
    std::copy(acc, acc + 8, s2_.begin() + p * 8);
  }
  double kmax2 = 0;
  for (std::int64_t t = 0; t < n; ++t) {
    const double s2 = s2_[static_cast<std::size_t>(t)];
    kmax2 = s2 > kmax2 || s2 != s2 ? s2 : kmax2;
  }
  // V packed in 8-column blocks, key-major inside a block (contiguous streams for the PV micro-kernel; dv % 8 == 0:
  // the stages' parse guarantees it, 512 in every DeepSeek model).
  Vp_.resize(static_cast<std::size_t>(dv * n));
  for (std::int64_t t = 0; t < n; ++t)  // each key row read once, in order
    for (std::int64_t c8 = 0; c8 < dv / 8; ++c8) {
      const double* src = K_.data() + t * D + c8 * 8;
      double* dst = Vp_.data() + (c8 * n + t) * 8;
      for (int x = 0; x < 8; ++x) dst[x] = src[x];  // (std::copy_n of 8 doubles became a memmove call)
    }
  // Heads in blocks of 64: the score workspace stays 64 x topk whatever h_q is (the per-element order is unchanged).
  const std::int64_t HB = 64;
  S_.resize(static_cast<std::size_t>(std::min(Hp, HB) * np));
  const double gD = gamma_n(static_cast<double>(D));
  for (std::int64_t h0 = 0; h0 < Hp; h0 += HB) {
    const std::int64_t hb = std::min(HB, Hp - h0);
    gemm_qk(Q_.data() + h0 * D, hb, Kp_.data(), np, D, S_.data());
    for (std::int64_t h = h0; h < h0 + hb; ++h) {
      double* s = S_.data() + (h - h0) * np;
      if (h >= H) {
        std::fill(s, s + np, 0.0);
        continue;
      }
      HeadResult& r = res_[static_cast<std::size_t>(h)];
      double m = -kInf, zmax = 0;
      bool nan = false;
      for (std::int64_t t = 0; t < n; ++t) {
        const double z = sm * s[t];
        s[t] = z;
        nan |= z != z;
        m = z > m ? z : m;
        zmax = std::max(zmax, std::fabs(z));
      }
      double q2 = 0;
      for (std::int64_t d = 0; d < D; ++d) q2 += Q_[static_cast<std::size_t>(h * D + d)] * Q_[static_cast<std::size_t>(h * D + d)];
      head_bounds(sm, gD, q2, kmax2, zmax, m, r);
      if (!head_classify(nan, m, r)) {
        std::fill(s, s + np, 0.0);
        continue;
      }
      exp_shifted(s, n, m);  // s[t] = det_exp(s[t] - m), vectorized with det_exp's operations
      double L = 0;
      for (std::int64_t t = 0; t < n; ++t) L += s[t];
      for (std::int64_t t = n; t < np; ++t) s[t] = 0;
      head_lse(L, r);
    }
    gemm_pv(S_.data(), hb, np, Vp_.data(), n, dv, O_.data() + h0 * dv, M_.data() + h0 * dv);
  }
  for (std::int64_t h = 0; h < H; ++h) head_finish(res_[static_cast<std::size_t>(h)], dv, O_.data() + h * dv, M_.data() + h * dv);
}

}  // namespace dsa::attn
