#include "numerics/rope.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>


namespace dsa::num {

RopeLayout parse_rope_layout(const std::string& s) {
  if (s == "neox") return RopeLayout::neox;
  if (s == "interleaved") return RopeLayout::interleaved;
  throw std::invalid_argument("rope_layout must be neox or interleaved, found '" + s + "'");
}

namespace {
// The demo's find_correction_dim, in Python double arithmetic.
double correction_dim(double num_rotations, double dim, double base, double max_seq_len) {
  const double pi = 3.141592653589793;
  return dim * std::log(max_seq_len / (num_rotations * 2.0 * pi)) / (2.0 * std::log(base));
}
}  // namespace

std::vector<float> yarn_inv_freqs(const YarnParams& p) {
  const std::int64_t half = p.rope_dim / 2;
  const float dimf = static_cast<float>(p.rope_dim);
  std::vector<float> f(static_cast<std::size_t>(half));
  for (std::int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / dimf;                     // arange(0, dim, 2, fp32) / dim
    const float pw = static_cast<float>(std::pow(p.theta, static_cast<double>(e)));  // base ** e, rounded once
    f[static_cast<std::size_t>(i)] = 1.0f / pw;                           // 1.0 / tensor (fp32 divide)
  }
  if (p.max_seq_len > p.original_seq_len) {
    const double dim = static_cast<double>(p.rope_dim), ol = static_cast<double>(p.original_seq_len);
    double low = std::floor(correction_dim(p.beta_fast, dim, p.theta, ol));
    double high = std::ceil(correction_dim(p.beta_slow, dim, p.theta, ol));
    low = std::max(low, 0.0);
    high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;  // linear_ramp_factor's guard
    const float lowf = static_cast<float>(low), range = static_cast<float>(high - low);
    const float factor = static_cast<float>(p.factor);
    for (std::int64_t i = 0; i < half; ++i) {
      float ramp = (static_cast<float>(i) - lowf) / range;  // (arange(dim//2, fp32) - min) / (max - min)
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float smooth = 1.0f - ramp;
      const float fi = f[static_cast<std::size_t>(i)];
      const float a = (fi / factor) * (1.0f - smooth);  // freqs / factor * (1 - smooth): two roundings
      const float b = fi * smooth;
      f[static_cast<std::size_t>(i)] = a + b;
    }
  }
  return f;
}

void yarn_cos_sin(const std::vector<float>& inv_freqs, std::int64_t pos, float* cos_out, float* sin_out) {
  const float t = static_cast<float>(pos);  // torch.outer(arange(int64), fp32) promotes to fp32
  for (std::size_t i = 0; i < inv_freqs.size(); ++i) {
    const float th = t * inv_freqs[i];
    cos_out[i] = static_cast<float>(std::cos(static_cast<double>(th)));
    sin_out[i] = static_cast<float>(std::sin(static_cast<double>(th)));
  }
}

void v4_rope_row(std::int64_t rope, std::int64_t pos, float* cos_out, float* sin_out) {
  YarnParams y;
  y.rope_dim = rope;
  y.theta = 160000.0;
  y.factor = 16.0;
  y.original_seq_len = 65536;
  y.max_seq_len = 65536 * 16;
  y.beta_fast = 32.0;
  y.beta_slow = 1.0;
  static const std::vector<float> f64 = yarn_inv_freqs(y);
  const std::vector<float> f = rope == 64 ? f64 : yarn_inv_freqs(y);
  std::vector<float> c(static_cast<std::size_t>(rope / 2)), s(c.size());
  yarn_cos_sin(f, pos, c.data(), s.data());
  for (std::int64_t i = 0; i < rope / 2; ++i) {
    cos_out[2 * i] = cos_out[2 * i + 1] = c[static_cast<std::size_t>(i)];
    sin_out[2 * i] = sin_out[2 * i + 1] = s[static_cast<std::size_t>(i)];
  }
}

void v4_cos_sin_cache(std::int64_t rope, std::int64_t rows, float* out) {
  std::vector<float> co(static_cast<std::size_t>(rope)), si(co.size());
  for (std::int64_t p = 0; p < rows; ++p) {
    v4_rope_row(rope, p, co.data(), si.data());
    for (std::int64_t i = 0; i < rope / 2; ++i)
      out[p * rope + i] = co[static_cast<std::size_t>(2 * i)], out[p * rope + rope / 2 + i] = si[static_cast<std::size_t>(2 * i)];
  }
}

}  // namespace dsa::num
