#include "stage/gen/index_rows.hpp"

#include <algorithm>

#include "numerics/formats.hpp"
#include "stage/gen/gen.hpp"

namespace dsa::gen {

namespace {
enum Stream : std::uint64_t { kRowsIdx = 101, kLen, kSink };
}

std::vector<std::int64_t> index_rows(const golden::GoldenSpec& s, const Rng& root, std::int64_t rows, std::int64_t K,
                                     std::int64_t N, std::int64_t oob_base) {
  std::vector<std::int64_t> idx(static_cast<std::size_t>(rows * K), -1);
  const double inv = s.param("invalid_frac", 0.1), oob = s.param("oob_frac", 0.0), dup = s.param("dup_frac", 0.0);
  const auto lonely_every = static_cast<std::int64_t>(s.param("lonely_every", 0));
  const bool leading = s.param("leading_invalid", 0) != 0;
  const Rng base = root.fork(kRowsIdx);
  for (std::int64_t r = 0; r < rows; ++r) {
    Rng rng = base.fork(static_cast<std::uint64_t>(r));
    std::int64_t* row = idx.data() + r * K;
    if (lonely_every > 0 && r % lonely_every == lonely_every - 1) continue;  // all -1
    const auto perm = gen::permutation(rng.fork(1), N);
    std::int64_t next = 0;
    for (std::int64_t p = 0; p < K; ++p) {
      if (leading && r % 2 == 0 && p < 64 && K > 64) continue;
      const double u = rng.uniform();
      if (u < inv) continue;
      if (u < inv + oob) {
        row[p] = oob_base + rng.randint(0, 1000);
        continue;
      }
      if (u < inv + oob + dup && p > 0) {
        std::vector<std::int64_t> prev;
        for (std::int64_t q = 0; q < p; ++q)
          if (row[q] >= 0 && row[q] < oob_base) prev.push_back(row[q]);
        if (!prev.empty()) {
          row[p] = prev[static_cast<std::size_t>(rng.randint(0, static_cast<std::int64_t>(prev.size()) - 1))];
          continue;
        }
      }
      if (next < N) row[p] = perm[static_cast<std::size_t>(next++)];
    }
  }
  return idx;
}

std::vector<std::int64_t> topk_lengths(const golden::GoldenSpec& s, const Rng& root, std::int64_t n, std::int64_t K) {
  if (s.param("topk_length", 0) == 0) return {};
  std::vector<std::int64_t> v(static_cast<std::size_t>(n));
  Rng rng = root.fork(kLen);
  for (std::int64_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = i == 0 ? 0 : i == 1 ? K : rng.randint(0, K);
  return v;
}

bool sinks(const golden::GoldenSpec& s, const Rng& root, std::int64_t H, Tensor& out) {
  const double sig = s.param("sink", 0.0);
  if (sig <= 0) return false;
  out = Tensor(DType::f32, {H});
  Rng rng = root.fork(kSink);
  const double large = s.param("sink_large", 95.0);
  for (std::int64_t h = 0; h < H; ++h)
    out.data<float>()[h] = static_cast<float>(h == 0 ? large : h == 1 ? -large : sig * rng.normal());
  return true;
}

void bf16_normal(Rng& rng, double sigma, std::int64_t n, std::uint16_t* dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = num::f64_to_bf16(sigma * rng.normal());
}

Tensor to_tensor(const std::vector<std::int64_t>& v, std::vector<std::int64_t> shape) {
  Tensor t(DType::i32, std::move(shape));
  for (std::size_t i = 0; i < v.size(); ++i) t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v[i]);
  return t;
}

}  // namespace dsa::gen
