// indexer.quant on the GPU: one thread per (row, block), the block quantizer every writer shares
// (engines/quant/quant_core.hpp; built with --fmad=false and IEEE division): identical bits to the CPU (backend-diff).
#include <cstdint>

#include "backend/cuda.hpp"
#include "engines/quant/quant_core.hpp"
#include "stages/indexer/quant/cuda.hpp"

namespace dsa::indexer::quant {

namespace {

__device__ inline float element(const std::uint16_t* xb, const float* xf, std::int64_t i) {
  return xb ? dsa::quant::bf16_value(xb[i]) : xf[i];
}

__global__ void quant_kernel(const std::uint16_t* xb, const float* xf, std::int64_t T, std::int64_t K, std::int64_t bs,
                             dsa::quant::QuantParams p, std::uint8_t* y, float* scale) {
  const std::int64_t nb = K / bs;
  const std::int64_t id = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= T * nb) return;
  const std::int64_t o = (id / nb) * K + (id % nb) * bs;
  scale[id] = dsa::quant::quantize_block_with([&](std::int64_t i) { return element(xb, xf, o + i); }, bs, p,
                                              [&](std::int64_t i, std::uint8_t c) { y[o + i] = c; });
}

}  // namespace

void quant_rows_cuda(const std::uint16_t* x_bf16, const float* x_f32, std::int64_t T, std::int64_t K, std::int64_t bs,
                     const dsa::quant::QuantParams& q, std::uint8_t* y, float* scale) {
  const std::int64_t nb = K / bs, n = T * K;
  const std::size_t in_bytes = static_cast<std::size_t>(n) * (x_bf16 ? 2 : 4);
  cuda::Buffer dx(in_bytes), dy(static_cast<std::size_t>(n)), ds(static_cast<std::size_t>(T * nb) * 4);
  dx.upload(x_bf16 ? static_cast<const void*>(x_bf16) : static_cast<const void*>(x_f32), in_bytes);
  const std::int64_t threads = T * nb;
  if (threads > 0) {
    const int tpb = 128;
    const unsigned blocks = static_cast<unsigned>((threads + tpb - 1) / tpb);
    quant_kernel<<<blocks, tpb>>>(x_bf16 ? static_cast<const std::uint16_t*>(dx.get()) : nullptr,
                                  x_bf16 ? nullptr : static_cast<const float*>(dx.get()), T, K, bs, q,
                                  static_cast<std::uint8_t*>(dy.get()), static_cast<float*>(ds.get()));
    cuda::check_last("indexer.quant kernel");
  }
  dy.download(y, static_cast<std::size_t>(n));
  ds.download(scale, static_cast<std::size_t>(T * nb) * 4);
}

}  // namespace dsa::indexer::quant
