// v41.indexer_k: selftest cases and mutants from real bug shapes (RoPE position and pairing, quantization source,
// the group gate, e2m1 ties, the MXFP4 floor), each reproduced through the reference and diagnosed by its own hint.
#include "stage/mutant_kit.hpp"
#include "stages/v41/indexer_k/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::indexer_k {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "v41.indexer_k";
  const char* g = "v41k.tokens";
  return {
      {.name = "v41k_mxfp4", .stage = st, .generator = g, .seed = 51, .dims = {{"nblk", 2}, {"page_size", 128}, {"rec", 68}},
       .lists = {{"start_pos", {0, 5}}, {"q_len", {14, 6}}}, .params = {{"pads", 1}}, .attrs = {{"cmp_ratio", I(2)}},
       .doc = "ratio 2, MXFP4 68-byte records, a chunk ending mid-group"},
      {.name = "v41k_fp8", .stage = st, .generator = g, .seed = 52, .dims = {{"nblk", 2}, {"page_size", 128}, {"rec", 132}},
       .lists = {{"start_pos", {3}}, {"q_len", {16}}}, .attrs = {{"cmp_ratio", I(2)}}, .doc = "ratio 2, the FP8 option"},
  };
}

std::vector<Mutant> mutants() {
  const V fail{Verdict::FAIL};
  auto rb = [](Bug b) { return reference_bug(&run, b); };
  return {
      {"v41k_rope_at_position", "v41 §5", "v41k_fp8", fail, "RoPE at the token's own position instead of its group's start",
       rb(Bug::rope_at_position), "v41 §5"},
      {"v41k_rope_halves", "B58", "v41k_mxfp4", fail, "halves-style RoPE pairs (an MLX-style port) instead of interleaved ones",
       rb(Bug::rope_halves), "B58"},
      {"v41k_quant_fp32", "B49", "v41k_fp8", fail, "the fp32 RoPE result quantized without its bf16 rounding", rb(Bug::quant_fp32), "B49"},
      {"v41k_gate_ignored", "v41 §4", "v41k_mxfp4", fail, "mid-group tokens write a key into their group's slot", rb(Bug::gate_ignored), "v41 §4"},
      {"v41k_e2m1_ties_down", "B50", "v41k_mxfp4", fail, "e2m1 midpoints rounded down (DeepGEMM's utility)", rb(Bug::e2m1_ties_down), "B50"},
      {"v41k_mx4_floor_1e4", "B54", "v41k_mxfp4", fail, "the MXFP4 amax floor 1e-4 (vLLM before #41015)", rb(Bug::mx4_floor_1e4), "B54"},
  };
}

}  // namespace dsa::v41::indexer_k
