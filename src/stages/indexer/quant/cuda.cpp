// indexer.quant, the CUDA implementation's host side: the rows to the block quantizer on the GPU (cuda.cu), then the
// same packaging as the CPU reference (expected). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include "stages/indexer/quant/cuda.hpp"
#include "stages/indexer/quant/stage.hpp"

namespace dsa::indexer::quant {

Expected cuda(const Case& c, const Params& p, const RefOptions&) {
  const Tensor& x = c.input("x");
  const std::int64_t T = x.dim(0), K = x.dim(1);
  Tensor y(DType::fp8_e4m3fn, {T, K}, Tensor::Uninit{});
  Tensor scale(DType::f32, {T, K / p.block_size}, Tensor::Uninit{});
  const bool bf16 = x.dtype() == DType::bf16;
  quant_rows_cuda(bf16 ? x.data<std::uint16_t>() : nullptr, bf16 ? nullptr : x.data<float>(), T, K, p.block_size,
                  p.q, y.data<std::uint8_t>(),
                  scale.data<float>());
  return expected(std::move(y), std::move(scale), K, p.block_size);
}

}  // namespace dsa::indexer::quant
#endif
