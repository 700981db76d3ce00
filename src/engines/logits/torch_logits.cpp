#include "engines/logits/torch_logits.hpp"

#include "numerics/formats.hpp"

namespace dsa::engines::logits {

namespace tc = torch_core;

TorchLogitRow::TorchLogitRow(std::int64_t H, std::int64_t D, tc::Form form, bool bf16_logits)
    : H_(H), D_(D), k_(tc::consts(form, H, D)), bf16_(bf16_logits), qf_(static_cast<std::size_t>(H * D)),
      kf_(static_cast<std::size_t>(D)), qd_(qf_.size()), kd_(kf_.size()) {}

void TorchLogitRow::set_query(const std::uint8_t* q, const float* w) {
  for (std::size_t i = 0; i < qf_.size(); ++i) {
    qf_[i] = num::e4m3_to_f32(q[i]);
    qd_[i] = static_cast<double>(qf_[i]);
  }
  w_ = w;
}

TorchLogit TorchLogitRow::logit(const std::uint8_t* k, float scale) {
  for (std::int64_t d = 0; d < D_; ++d) {
    kf_[static_cast<std::size_t>(d)] = num::e4m3_to_f32(k[d]);
    kd_[static_cast<std::size_t>(d)] = static_cast<double>(kf_[static_cast<std::size_t>(d)]);
  }
  tc::Acc acc;
  float S = 0.0f;
  for (std::int64_t h = 0; h < H_; ++h) {
    const float* qh = qf_.data() + h * D_;
    const double* qdh = qd_.data() + h * D_;
    double I = 0, A = 0;  // exact (logits_engine.hpp (1))
    for (std::int64_t d = 0; d < D_; ++d) {
      const double x = qdh[d] * kd_[static_cast<std::size_t>(d)];
      I += x;
      A += x < 0 ? -x : x;
    }
    tc::head(acc, I, A, static_cast<double>(w_[h]), static_cast<double>(scale), k_);
    S += tc::head_term(tc::dot32(qh, kf_.data(), D_), w_[h], scale, k_.form);
  }
  const float x = tc::finish32(S, scale, k_.form);
  TorchLogit r;
  r.emu_bits = bf16_ ? num::f32_to_bf16(x) : num::f32_bits(x);
  r.bound = tc::output_bound(tc::finish(acc, k_), acc.mag, bf16_);
  return r;
}

}  // namespace dsa::engines::logits
