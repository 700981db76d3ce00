// indexer.logits_ragged — DeepGEMM fp8_mqa_logits (spec v32 §3.2, §3.5): ragged prefill MQA logits
//   logit(i, j) = kv_scale[j] * sum_h relu(q[i,h,:] . kv[j,:]) * W[i,h]     for ks[i] <= j < ke[i]
// rounded once to fp32 (or bf16). The exact reference and its proof: engines/logits/logits_engine.hpp (contract way 2).
// Column layout: [S, N] (column = key), or compressed [S, max_seqlen_k] with column t = key ks[i] + t.
#pragma once
#include <algorithm>

#include "stage/stage.hpp"

namespace dsa::engines::logits {
struct LogitsTensors;
}

namespace dsa::indexer::logits_ragged {

struct Params : dsa::Params {
  bool clean_logits = true;      // columns outside [ks, ke) are -inf (else undefined)
  std::int64_t max_seqlen_k = 0;  // > 0: compressed columns
  bool bf16 = false;             // logits_dtype
  bool torch = false;            // attr kernel = vllm-torch: judged by its derived bound (engines/logits/torch_logits_core.hpp)
  std::string tolerance_policy() const override { return torch ? "" : bf16 ? "bf16-logits" : ""; }
};

// Key range and output column of row i (ks/ke validated by parse; clamped all the same).
struct Rows {
  const std::int32_t* ks;
  const std::int32_t* ke;
  std::int64_t N, msk;
  std::int64_t cols() const { return msk > 0 ? msk : N; }
  std::int64_t lo(std::int64_t i) const { return std::clamp<std::int64_t>(ks[i], 0, N); }
  std::int64_t hi(std::int64_t i) const {
    std::int64_t h = std::clamp<std::int64_t>(ke[i], lo(i), N);
    return msk > 0 ? std::min(h, lo(i) + msk) : h;
  }
  std::int64_t col(std::int64_t i, std::int64_t j) const { return msk > 0 ? j - lo(i) : j; }
};

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
// The Expected of computed logits tensors (rows [opt.row_begin, row_end)): the bounded RefTensor, the deepgemm-sm90
// emulation when the case's kernel asks for it (computed on the host for every backend) and the coordinate names.
Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const engines::logits::LogitsTensors& lt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the exact logits on the GPU
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::indexer::logits_ragged
