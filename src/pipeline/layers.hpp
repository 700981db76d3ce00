// Layer goldens and the layer selftest (issue #17): whole pipelines of one layer in one file, the member cases joined
// by links (Case::links; pipeline/layer.hpp checks them as chains).
//   golden: `dsa-check golden --case layer_v32_decode` (listed by --list, committed ones by --committed) writes the
//           members with inputs/ and expected/, every linked input an HDF5 hard link to its source's expected/ tensor
//           (or the bytes plus attr from:<input> where the consumer reads it in another shape).
//   selftest: every mutant of every member's stage applied to that member's outputs, the members below it recomputed
//           from the mutated outputs (correct downstream kernels fed a bad upstream): the first local divergence of
//           the layer must be the mutated member (attribution), and a benign mutant must leave every stage passing.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "pipeline/golden.hpp"

namespace dsa::golden {

struct LayerSpec {
  std::string name;  // file stem and attr `layer` of its members
  std::string doc;
  std::uint64_t seed = 0;
  bool committed = true;
  // The members' inputs and attrs, in any order, each linked input named in Case::links as "MEMBER/expected/TENSOR";
  // a generated input of that name gives the shape the source is read as (same element count).
  std::function<std::vector<Case>(std::uint64_t seed, int threads)> build;
};

const std::vector<LayerSpec>& layer_catalogue();
const LayerSpec* find_layer_spec(const std::string& name);

// The members in pipeline order (links first), each linked input filled from its source's expected/ tensor, each
// reference run on those inputs (expected/ filled). `refs`, when given, receives each member's Expected.
std::vector<Case> make_layer(const LayerSpec& s, std::optional<std::uint64_t> seed, int threads, Backend backend = Backend::cpu,
                             std::vector<Expected>* refs = nullptr);

// The layer selftest over every catalogue layer (attribution of every applicable mutant); prints one line per layer
// and every misattribution. Returns false when a mutant is misattributed (or missed) or a layer cannot be built.
bool layer_selftest(std::ostream& out, int threads, Backend backend, bool verbose);

}  // namespace dsa::golden
