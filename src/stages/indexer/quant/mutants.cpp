// indexer.quant: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/indexer/quant/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::quant {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "quant", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 1,
       .dims = {{"T", 4}, {"K", 256}}, .params = {{"outlier_p", 0.05}},
       .doc = "per-block dynamic range with outliers: ue8m0 and fp32 scales differ"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"quant_fp32_scale", "B2", "quant", V{Verdict::FAIL}, "act_quant with fp32 amax/448 scales instead of ue8m0",
       mutant::buggy([](Case& c) { set_attr(c, "scale_fmt", std::string("fp32_div")); })}
  };
}

}  // namespace dsa::indexer::quant
