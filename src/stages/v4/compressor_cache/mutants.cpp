// v4.compressor_cache: selftest cases and mutants modelled on real bug shapes of cache writers and of the vLLM V4
// compressor (a record at the wrong slot, pad tokens written, the null block written, RoPE before the norm, the
// Ascend Hadamard on the CUDA indexer path, a state row not saved, a non-power-of-two scale, ape not added), each
// reproduced through the reference with a Bug switch, each with the verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/v4/compressor_cache/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::compressor_cache {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "v4.compressor_cache";
  const char* g = "v4cc.step";
  return {
      {.name = "v4cc_indexer", .stage = st, .generator = g, .seed = 41, .dims = {{"D", 128}, {"sbs", 4}, {"kbs", 4}},
       .lists = {{"start_pos", {0, 6}}, {"q_len", {8, 3}}}, .params = {{"pads", 2}}, .attrs = {{"cmp_ratio", I(4)}},
       .doc = "indexer store (D 128, C4): prefill and a decode run, pads"},
      {.name = "v4cc_main", .stage = st, .generator = g, .seed = 42, .dims = {{"D", 512}, {"sbs", 4}, {"kbs", 2}},
       .lists = {{"start_pos", {2, 9}}, {"q_len", {6, 3}}}, .params = {{"pads", 1}}, .attrs = {{"cmp_ratio", I(4)}},
       .doc = "main store (D 512, C4, MODEL1 records)"},
  };
}

std::vector<Mutant> mutants() {
  const V fail{Verdict::FAIL, Verdict::NONFINITE};
  return {
      {"v4cc_kv_slot_next", "B12", "v4cc_indexer", fail, "the compressed record written one slot after kv_slot_mapping's",
       reference_bug(&run, Bug::kv_slot_next)},
      {"v4cc_pad_written", "B12", "v4cc_indexer", fail, "a pad token (slot -1) saves its state row into slot 0, the null block",
       reference_bug(&run, Bug::pad_written)},
      {"v4cc_null_block_written", "B38", "v4cc_main", fail, "the record written into the null block 0 instead of its own block",
       reference_bug(&run, Bug::null_block_written)},
      {"v4cc_rope_unnormed", "B43", "v4cc_main", fail, "RoPE applied to the pooled value before the RMSNorm", reference_bug(&run, Bug::rope_unnormed)},
      {"v4cc_hadamard_on_d128", "v4 §10", "v4cc_indexer", fail,
       "the Hadamard-128 of the Ascend / reference path applied on vLLM's CUDA indexer store", reference_bug(&run, Bug::hadamard)},
      {"v4cc_state_row_not_saved", "v4 §10", "v4cc_indexer", fail, "the state row of each request's last token not saved",
       reference_bug(&run, Bug::state_not_saved)},
      {"v4cc_scale_fp32", "B25", "v4cc_indexer", fail, "the scale fl32(amax * fl32(1/448)) stored instead of its power-of-two ceiling",
       reference_bug(&run, Bug::scale_fp32)},
      {"v4cc_ape_not_added", "v4 §2.1", "v4cc_main", fail, "the score saved without ape[p % r]", reference_bug(&run, Bug::ape_not_added)},
  };
}

}  // namespace dsa::v4::compressor_cache
