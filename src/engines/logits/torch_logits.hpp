// Host side of the `vllm-torch` logits arithmetic (torch_logits_core.hpp has the derivation): for one query row
// against one key, the fixed-order emulation and the bound the indexer logits stages judge that producer by.
#pragma once
#include <cstdint>
#include <vector>

#include "engines/logits/torch_logits_core.hpp"

namespace dsa::engines::logits {

struct TorchLogit {
  std::uint32_t emu_bits = 0;  // the emulated logit (fp32 bits, or bf16 bits for bf16 logits)
  double bound = 0;            // output_bound: |kernel logit - reference logit| <= bound (0 when not finite)
};

// One query row (H heads of D e4m3 codes, H fp32 weights) decoded once; logit() for each key (D codes + fp32 scale).
class TorchLogitRow {
 public:
  TorchLogitRow(std::int64_t H, std::int64_t D, torch_core::Form form, bool bf16_logits);
  void set_query(const std::uint8_t* q, const float* w);
  TorchLogit logit(const std::uint8_t* k, float scale);

 private:
  std::int64_t H_, D_;
  torch_core::Consts k_;
  bool bf16_;
  const float* w_ = nullptr;
  std::vector<float> qf_, kf_;
  std::vector<double> qd_, kd_;
};

}  // namespace dsa::engines::logits
