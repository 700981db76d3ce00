// indexer.quant on the GPU: one thread per (row, block), the same fp32 / integer operations as the CPU reference
// (numerics/fp8_core.hpp; built with --fmad=false and IEEE division): identical bits (dsa-check backend-diff).
#include <cstdint>

#include "backend/cuda.hpp"
#include "numerics/fp8_core.hpp"
#include "stages/indexer/quant/cuda_api.hpp"

namespace dsa::indexer::quant {

namespace {

__device__ inline float element(const std::uint16_t* xb, const float* xf, std::int64_t i) {
  return xb ? fp8core::from_bits(static_cast<std::uint32_t>(xb[i]) << 16) : xf[i];
}

__global__ void quant_kernel(const std::uint16_t* xb, const float* xf, std::int64_t T, std::int64_t K, std::int64_t bs,
                             int fmt, bool mul_inv, bool clamp, float eps, std::uint8_t* y, float* scale) {
  const std::int64_t nb = K / bs;
  const std::int64_t id = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= T * nb) return;
  const std::int64_t t = id / nb, b = id % nb, o = t * K + b * bs;
  float amax = 0.0f;  // max |x|, exact; NaN when an element is NaN (fp8core::block_amax over the loaded values)
  bool nan = false;
  for (std::int64_t i = 0; i < bs; ++i) {
    const float a = fp8core::from_bits(fp8core::bits(element(xb, xf, o + i)) & 0x7FFFFFFFu);
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  if (nan) amax = fp8core::quiet_nan();
  const float s = fp8core::scale_of(static_cast<fp8core::Fmt>(fmt), amax, eps);
  const float inv = 1.0f / s;
  const bool mul = mul_inv || fp8core::exact_reciprocal(s, inv);
  for (std::int64_t i = 0; i < bs; ++i) y[o + i] = fp8core::encode(element(xb, xf, o + i), mul, clamp, s, inv);
  scale[id] = s;
}

}  // namespace

void quant_rows_cuda(const std::uint16_t* x_bf16, const float* x_f32, std::int64_t T, std::int64_t K, std::int64_t bs, int fmt,
                     bool mul_inv, bool clamp, float eps, std::uint8_t* y, float* scale) {
  const std::int64_t nb = K / bs, n = T * K;
  const std::size_t in_bytes = static_cast<std::size_t>(n) * (x_bf16 ? 2 : 4);
  cuda::Buffer dx(in_bytes), dy(static_cast<std::size_t>(n)), ds(static_cast<std::size_t>(T * nb) * 4);
  dx.upload(x_bf16 ? static_cast<const void*>(x_bf16) : static_cast<const void*>(x_f32), in_bytes);
  const std::int64_t threads = T * nb;
  if (threads > 0) {
    const int tpb = 128;
    const unsigned blocks = static_cast<unsigned>((threads + tpb - 1) / tpb);
    quant_kernel<<<blocks, tpb>>>(x_bf16 ? static_cast<const std::uint16_t*>(dx.get()) : nullptr,
                                  x_bf16 ? nullptr : static_cast<const float*>(dx.get()), T, K, bs, fmt, mul_inv, clamp, eps,
                                  static_cast<std::uint8_t*>(dy.get()), static_cast<float*>(ds.get()));
    cuda::check_last("indexer.quant kernel");
  }
  dy.download(y, static_cast<std::size_t>(n));
  ds.download(scale, static_cast<std::size_t>(T * nb) * 4);
}

}  // namespace dsa::indexer::quant
