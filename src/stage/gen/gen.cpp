#include "stage/gen/gen.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "engines/quant/block_quant.hpp"

namespace dsa::gen {

// N(0, sigma) with probability p_out of an outlier scaled by 2^U{3..10} (activation outliers).
double gauss_outlier(Rng& r, double sigma, double p_out) {
  double v = sigma * r.normal();
  if (p_out > 0.0 && r.uniform() < p_out) v *= pow2(r.randint(3, 10));
  return v;
}

// Fisher-Yates permutation of [0, n) from one stream.
std::vector<std::int64_t> permutation(Rng rng, std::int64_t n) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) p[static_cast<std::size_t>(i)] = i;
  for (std::int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(rng.randint(0, i))]);
  return p;
}

// act_quant of one bf16 row (length n, one block when n <= 128, else 128-blocks): codes into y, returns the
// scale of the first block (callers quantize one block per row).
float quant_bf16(const std::uint16_t* x, std::int64_t n, std::uint8_t* y) {
  std::vector<float> f(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) f[static_cast<std::size_t>(i)] = num::bf16_to_f32(x[i]);
  return quant::quantize_block(f.data(), n, quant::QuantParams{}, y);  // ue8m0
}

const float kInvSqrt128 = num::f32_from_bits(0x3DB504F3u);

QBuild make_q(const Rng& root, std::int64_t rows, std::int64_t H, std::int64_t D, int threads, int sign,
              std::int64_t mixed_every, std::int64_t mixed_row_mod) {
  QBuild b;
  b.q_fp8 = Tensor(DType::fp8_e4m3fn, {rows, H, D});
  b.weights = Tensor(DType::f32, {rows, H});
  std::vector<float> qs(static_cast<std::size_t>(rows * H));
  for_rows(root, kQ, rows * H, threads, [&](std::int64_t rh, Rng& rng) {
    std::vector<std::uint16_t> x(static_cast<std::size_t>(D));
    const std::int64_t row = rh / H, h = rh % H;
    const bool constrained = sign != 0 && !(mixed_every > 0 && row % mixed_row_mod == 1 && h % mixed_every == 0);
    for (auto& v : x) {
      double g = gauss_outlier(rng, 1.0, 0.004);
      if (constrained) g = sign * std::fabs(g);
      v = num::f64_to_bf16(g);
    }
    qs[static_cast<std::size_t>(rh)] = quant_bf16(x.data(), D, b.q_fp8.data<std::uint8_t>() + rh * D);
  });
  for_rows(root, kW, rows, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t h = 0; h < H; ++h) {
      const float w = f32(rng.normal() * 0.125);  // weights_proj(x) * 64^-0.5
      b.weights.data<float>()[r * H + h] = (w * qs[static_cast<std::size_t>(r * H + h)]) * kInvSqrt128;
    }
  });
  return b;
}

// Keys: bf16 gaussian (or |gaussian| when positive) -> act_quant per token (ue8m0): codes [N, D], scales [N].
void make_keys(const Rng& root, std::uint64_t tid, std::int64_t N, std::int64_t D, int threads, bool positive,
               std::uint8_t* codes, float* scales) {
  for_rows(root, tid, N, threads, [&](std::int64_t j, Rng& rng) {
    std::vector<std::uint16_t> x(static_cast<std::size_t>(D));
    const double sigma = pow2(rng.randint(-3, 3));  // per-token magnitude spread -> distinct pow2 scales
    for (auto& v : x) {
      double g = gauss_outlier(rng, sigma, 0.004);
      v = num::f64_to_bf16(positive ? std::fabs(g) : g);
    }
    scales[j] = quant_bf16(x.data(), D, codes + j * D);
  });
}

void poison_bytes(const Rng& root, std::int64_t rows, std::int64_t width, int threads, std::uint8_t* dst) {
  for_rows(root, kPoison, rows, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t b = 0; b < width; ++b) dst[r * width + b] = static_cast<std::uint8_t>(rng.next_u64() >> 56);
  });
}

std::vector<std::int64_t> list_or(const GoldenSpec& s, const std::string& k, std::vector<std::int64_t> def) {
  return s.has_list(k) ? s.list(k) : def;
}

layouts::IndexerKCache spec_kcache(const GoldenSpec& s, std::int64_t page_size, std::int64_t head_dim) {
  layouts::IndexerKCache L{page_size, head_dim};
  auto it = s.attrs.find("layout");
  if (it != s.attrs.end())
    if (const auto* name = std::get_if<std::string>(&it->second))
      L.order = layouts::indexer_kcache_order(*name).value_or(layouts::KCacheOrder::planar);
  return L;
}

}  // namespace dsa::gen
