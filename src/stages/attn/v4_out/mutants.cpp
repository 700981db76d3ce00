// attn.v4_out: selftest cases and mutants modelled on real bug shapes (spec v4 §4.4, validation_anchors B1), each
// with the verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/attn/v4_out/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::v4_out {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {{.name = "v4out", .stage = "attn.v4_out", .generator = "v4_out.tokens", .seed = 41,
           .dims = {{"T", 3}, {"N", 8}, {"D", 128}, {"R", 16}, {"dim", 32}}, .attrs = {{"o_groups", I(4)}},
           .doc = "4 groups of 2 heads, 128 dims (64 rope), o_lora_rank 16"}};
}

namespace {
std::function<void(Case&, const Expected&, std::uint64_t)> bug(Bug b) { return reference_bug(&run, b); }
}  // namespace

std::vector<Mutant> mutants() {
  const V fail{Verdict::FAIL};
  return {
      {"v4out_forward_rope", "v4 §4.4", "v4out", fail, "sin not negated: the output rotated forward again", bug(Bug::forward_rope)},
      {"v4out_no_inverse_rope", "v4 §4.4", "v4out", fail, "the inverse RoPE skipped", bug(Bug::no_inverse_rope)},
      {"v4out_neox_pairs", "B1", "v4out", fail, "NeoX half-split pairs instead of interleaved (2i, 2i+1)", bug(Bug::neox_pairs)},
      {"v4out_rope_first_dims", "v4 §4.4", "v4out", fail, "the rotation on dims [0, 64) instead of the last 64", bug(Bug::rope_first_dims)},
      {"v4out_prev_row_table", "B19", "v4out", fail, "the cos/sin row of the previous token (position off by one)", bug(Bug::prev_row_table)},
      {"v4out_groups_permuted", "v4 §4.4", "v4out", fail, "group g multiplied by wo_a's block of group g + 1", bug(Bug::groups_permuted)},
      {"v4out_heads_strided", "v4 §4.4", "v4out", fail, "groups of strided heads {g, g + G, ...} instead of contiguous blocks",
       bug(Bug::heads_strided)},
  };
}

}  // namespace dsa::attn::v4_out
