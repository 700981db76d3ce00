// v4.compressor's CUDA entry point (cuda.cu), callable from C++20 code: the two projections of this step's tokens,
// KV = x . wkv^T and S = x . wgate^T before the ape / fp32 steps, each element an fp64 fma chain over h in increasing
// order -- the chain attn::gemm_qk keeps on the CPU (backend/chain_tile.cuh), so the same bits. Tokens run in chunks;
// after each, emit(t0, nt, Sk, Sg) on the host with Sk / Sg [nt, C2] row-major. std::runtime_error on a CUDA failure.
#pragma once
#include <cstdint>
#include <functional>

namespace dsa::v4::compressor {

void project_cuda(const std::uint16_t* x, std::int64_t T, std::int64_t H, const std::uint16_t* wkv, const std::uint16_t* wgate,
                  std::int64_t C2, const std::function<void(std::int64_t, std::int64_t, const double*, const double*)>& emit);

}  // namespace dsa::v4::compressor
