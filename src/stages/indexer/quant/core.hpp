// indexer.quant — act_quant per 1 x block_size block (spec v32 §2.5). Bit-exact by construction: amax is exact,
// the scale is one fp32 operation (or an exponent), every code is one RNE cast (engines/quant/block_quant.hpp).
#pragma once
#include "stage/stage.hpp"
#include "engines/quant/block_quant.hpp"

namespace dsa::indexer::quant {

struct Params : dsa::Params {
  std::int64_t block_size = 128;
  dsa::quant::QuantParams q;
};

// One row of K values (exact fp32 widening of the input): codes y[K], scales[K / block_size].
inline void quantize_row(const float* x, std::int64_t K, const Params& p, std::uint8_t* y, float* scales) {
  for (std::int64_t b = 0; b < K / p.block_size; ++b)
    scales[b] = dsa::quant::quantize_block(x + b * p.block_size, p.block_size, p.q, y + b * p.block_size);
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // stage.cpp, with DSA_CUDA_BACKEND
// The reference tensors of codes y [T, K] and scales [T, K / bs] (both backends).
Expected expected(Tensor y, Tensor scale, std::int64_t K, std::int64_t bs);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::quant
