// The stage registry: the one table of DSA stages. Each entry says everything about a stage — its dump
// schema (tensors, dtypes, ranks, symbolic dims, attrs), its reference function, its comparators and
// tolerance profiles. The CLI, the HDF5 reader/validator, the golden generator and the docs
// (`dsa-check stages --json`) all read this table.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "stages/expected.hpp"
#include "tensor/case.hpp"

namespace dsa {

enum class AttrType { integer, number, string, boolean };
std::string_view attr_type_name(AttrType t);

struct AttrSpec {
  std::string name;
  AttrType type = AttrType::integer;
  bool required = false;
  std::optional<AttrValue> default_value;
  std::vector<std::string> choices;  // allowed values (strings, or integers written as strings); empty = any
  std::string doc;
};

// A tensor in the schema. `dims` holds one or more alternative shapes, each a comma-separated list of dims;
// a dim is an integer literal, a symbol (bound consistently across all tensors of the case, and by an integer
// attr of the same name if present), a product of symbols/literals ("B*next_n"), or "?" (any).
struct TensorSpec {
  std::string name;
  std::vector<DType> dtypes;        // allowed logical dtypes
  std::vector<std::string> dims;    // alternatives, e.g. {"B", "B,next_n"}
  bool optional = false;
  std::string doc;
};

struct OutputSpec {
  TensorSpec tensor;
  CompareKind compare = CompareKind::bytes;
};

// Named tolerance profile for bounded comparisons: |out - ref| <= rtol * M + atol.
struct TolerancePolicy {
  std::string name;
  double rtol = 0.0;
  double atol = 0.0;
  std::string doc;
};
// All tolerance profiles (exact, sm90-fp8, bf16-logits, ...).
const std::vector<TolerancePolicy>& tolerance_profiles();
const TolerancePolicy* find_tolerance_profile(const std::string& name);

using ReferenceFn = std::function<Expected(const Case&, const RefOptions&)>;
// Semantic checks beyond dims/dtypes (value constraints across attrs and tensors); appends problems.
using ExtraCheckFn = std::function<void(const Case&, std::vector<Problem>&)>;

struct Stage {
  std::string name;                 // "indexer.logits_ragged"
  std::string summary;              // one line
  std::string spec;                 // spec section, e.g. "v32 §3.2"
  std::vector<AttrSpec> attrs;
  std::vector<TensorSpec> inputs;
  std::vector<OutputSpec> outputs;
  ExtraCheckFn extra_check;         // may be empty
  ReferenceFn reference;            // CPU reference
  std::vector<std::string> emulation_profiles;  // kernel emulations the reference can compute
  std::string default_tolerance = "exact";      // tolerance profile for bounded outputs
  int pipeline_order = 0;           // position in the DSA data flow (first-divergence report)
};

// The registry (built once, immutable).
const std::vector<Stage>& stages();
const Stage* find_stage(const std::string& name);

// Validate a case against its stage's schema: unknown stage, missing/extra tensors, dtype, rank, dims,
// attrs, then the stage's extra checks. Returns every problem (empty = valid). `check_outputs` also validates
// the outputs/ and expected/ groups when present.
std::vector<Problem> validate_case(const Case& c, bool check_outputs = true);

// Runs the CPU reference of the case's stage (std::runtime_error naming the case for an unknown stage).
Expected run_reference(const Case& c, const RefOptions& opt = {});

// Apply attr defaults declared by the stage (for attrs the case does not carry).
void apply_attr_defaults(Case& c);

}  // namespace dsa
