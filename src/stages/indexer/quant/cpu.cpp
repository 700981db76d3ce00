// indexer.quant CPU reference: rows in parallel (each row independent: any thread count gives the same bits).
#include <omp.h>

#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "stages/indexer/quant/stage.hpp"

namespace dsa::indexer::quant {

namespace {

// One row of K values (exact fp32 widening of the input): codes y[K], scales[K / block_size].
inline void quantize_row(const float* x, std::int64_t K, const Params& p, std::uint8_t* y, float* scales) {
  for (std::int64_t b = 0; b < K / p.block_size; ++b)
    scales[b] = dsa::quant::quantize_block(x + b * p.block_size, p.block_size, p.q, y + b * p.block_size);
}

}  // namespace

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& x = c.input("x");
  const std::int64_t T = x.dim(0), K = x.dim(1), bs = p.block_size, nb = K / bs;
  Tensor y(DType::fp8_e4m3fn, {T, K}, Tensor::Uninit{});  // every element written below
  Tensor scale(DType::f32, {T, nb}, Tensor::Uninit{});
  const bool is_bf16 = x.dtype() == DType::bf16;
  const std::uint16_t* xb = is_bf16 ? x.data<std::uint16_t>() : nullptr;
  const float* xf = is_bf16 ? nullptr : x.data<float>();
  std::uint8_t* yp = y.data<std::uint8_t>();
  float* sp = scale.data<float>();
#pragma omp parallel num_threads(opt.thread_count())
  {
    std::vector<float> row(static_cast<std::size_t>(K));
#pragma omp for schedule(static)
    for (std::int64_t t = 0; t < T; ++t) {
      const float* r = xf ? xf + t * K : row.data();
      if (xb) dsa::quant::bf16_to_f32_row(xb + t * K, K, row.data());
      quantize_row(r, K, p, yp + t * K, sp + t * nb);
    }
  }
  return expected(std::move(y), std::move(scale), K, bs);
}

Expected expected(Tensor y, Tensor scale, std::int64_t K, std::int64_t bs) {
  const std::int64_t nb = K / bs;
  Expected e;
  RefTensor ry;
  ry.name = "y";
  ry.value = std::move(y);
  ry.describe = [K](std::int64_t f) { return "token " + std::to_string(f / K) + " dim " + std::to_string(f % K); };
  RefTensor rs;
  rs.name = "scale";
  rs.value = std::move(scale);
  rs.describe = [nb, bs](std::int64_t f) {
    return "token " + std::to_string(f / nb) + " block " + std::to_string(f % nb) + " (dims " + std::to_string((f % nb) * bs) +
           ".." + std::to_string((f % nb) * bs + bs - 1) + ")";
  };
  e.tensors.push_back(std::move(ry));
  e.tensors.push_back(std::move(rs));
  return e;
}

}  // namespace dsa::indexer::quant
