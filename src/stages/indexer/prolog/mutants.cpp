// indexer.prolog: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/indexer/prolog/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::prolog {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "prolog", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 1,
       .dims = {{"T", 3}, {"H", 4}, {"start_pos", 100}}, .doc = "3 tokens, 4 heads, NeoX RoPE + Hadamard"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"prolog_rope_flipped", "B1", "prolog", V{Verdict::FAIL}, "indexer RoPE interleaved instead of NeoX",
       mutant::buggy([](Case& c) { set_attr(c, "rope_layout", std::string("interleaved")); })},
      {"prolog_no_hadamard", "B3", "prolog", V{Verdict::FAIL}, "Hadamard rotation skipped",
       mutant::buggy([](Case& c) { set_attr(c, "hadamard", std::int64_t{0}); })}
  };
}

}  // namespace dsa::indexer::prolog
