// Mutation library of `dsa-check selftest` (and of the golden demo files): small cases of every stage built from
// the references, outputs "as a correct kernel would" produce them, and mutants modelled on the real DSA bugs
// B1-B22 of ../shared/specs/validation_anchors.md §4, each with the verdict it must get.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compare/compare.hpp"
#include "stages/expected.hpp"
#include "tensor/case.hpp"

namespace dsa::selftest {

// Fills c.outputs from the reference `E` as a correct kernel might: bytes tensors exact; bounded tensors equal to
// the kernel's emulation when the case names one (attr `kernel`), otherwise perturbed inside half the case's
// default bound and rounded once to the output dtype, undefined elements filled with junk; top-k with in-band swaps
// (when the band allows), shuffled order (unless sorted) and -1 padding. Deterministic in `seed`.
// Compute `E` with the case's emulation requested (RefOptions::emulations = {cmp::requested_emulation(c, {})} when
// non-empty), as `check` does; otherwise a case with attr `kernel` gets perturbed logits, which `check` fails.
void plausible_outputs(Case& c, const Expected& E, std::uint64_t seed);

// Small base cases of every stage (inputs only), deterministic in `seed`. Names are unique ("quant", "prolog",
// "kcache", "ragged", "ragged_sm90", "paged", "topk_rel", "topk_abs", "topk_page").
std::vector<Case> base_cases(std::uint64_t seed);

struct Mutant {
  std::string name;                   // unique, used as the mutated case's name
  std::string bug;                    // B-number(s) of validation_anchors.md §4
  std::string base;                   // name of the base case it mutates
  std::vector<cmp::Verdict> expect;   // verdicts that count as "caught with the right kind"
  std::string doc;
  // Mutates the outputs of `c` (which hold plausible outputs of reference `E`). May re-run the stage reference
  // on modified inputs (a kernel with that bug) via buggy_outputs().
  std::function<void(Case& c, const Expected& E, std::uint64_t seed)> apply;
};
const std::vector<Mutant>& mutants();

// Outputs of a kernel with a bug expressible as modified inputs/attrs: copies `c`, applies `bug` to the copy, runs
// the stage reference on it and returns plausible outputs of that reference. Inputs of `c` are not changed.
TensorMap buggy_outputs(const Case& c, const std::function<void(Case&)>& bug, std::uint64_t seed);

}  // namespace dsa::selftest
