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

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the blocks on the GPU
#endif
// The reference tensors of codes y [T, K] and scales [T, K / bs] (cpu.cpp; both backends).
Expected expected(Tensor y, Tensor scale, std::int64_t K, std::int64_t bs);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::quant
