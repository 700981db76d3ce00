// The dump schema of a stage: its attrs, input and output tensors (dtypes, ranks, symbolic dims), and the one
// validator every reader uses (the CLI, `golden`, `selftest`; the Python kit reads the same declarations through
// `dsa-check stages --json`). Stage-specific value rules (cross-tensor ranges, page tables) live in each stage's
// parse(), which runs after this generic check; see src/stage/stage.hpp.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "tensor/expected.hpp"
#include "tensor/case.hpp"

namespace dsa {

struct Profile;

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

// Builders for the common kinds of attr (no literal defaults anywhere else: readers take them from here).
AttrSpec int_attr(std::string name, std::int64_t def, std::string doc);
AttrSpec required_int_attr(std::string name, std::string doc);
AttrSpec num_attr(std::string name, double def, std::string doc);
AttrSpec bool_attr(std::string name, bool def, std::string doc);
AttrSpec str_attr(std::string name, std::string def, std::vector<std::string> choices, std::string doc);
AttrSpec opt_str_attr(std::string name, std::vector<std::string> choices, std::string doc);
// Options without a default written into goldens (the stage derives the value when the case does not set it).
AttrSpec opt_int_attr(std::string name, std::string doc);
AttrSpec opt_bool_attr(std::string name, std::string doc);

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
  // Reference-free expectations checked on every kernel output (validation_anchors B5, B6; hints on failures).
  bool positive = false;          // every element finite and > 0 (scales)
  bool nonconstant_rows = false;  // no row (dim 0) whose >= 2 defined finite elements are all equal (logits)
};

struct Schema {
  std::vector<AttrSpec> attrs;
  std::vector<TensorSpec> inputs;
  std::vector<OutputSpec> outputs;
  const AttrSpec* attr(const std::string& name) const;
};

// Attrs that are not stage options but are read by dsa-check itself (provenance: layers, steps, the rows' requests,
// golden and selftest bookkeeping) or by people: accepted on every stage. Everything else a stage does not declare
// is an error (a misspelt option would otherwise be ignored and the kernel blamed). User metadata goes under the
// namespace kUserAttrPrefix ("meta.": e.g. meta.engine, meta.commit), never read.
struct ProvenanceAttr {
  const char* name;
  const char* doc;
};
const std::vector<ProvenanceAttr>& provenance_attrs();
inline constexpr const char* kUserAttrPrefix = "meta.";
bool is_provenance_attr(const std::string& name);

// Generic validation of a case against a schema: attr types and choices, missing / unknown tensors, dtypes, ranks,
// dims. `check_outputs` also validates outputs/ and expected/ (each output optional there). Returns every problem.
std::vector<Problem> validate_schema(const Case& c, const Schema& s, bool check_outputs);

// Adds the schema's declared defaults for attrs the case does not carry (goldens are written with every option).
void apply_attr_defaults(Case& c, const Schema& s);

// A float attr must be finite and >= 0 (> 0 when `positive`): NaN, inf or negative epsilons are input errors.
class AttrReader;
void check_finite_attr(const Case& c, const AttrReader& a, const std::string& name, bool positive, std::vector<Problem>& p);

// Typed attr access for a stage's parse(): the case's value, else the schema's declared default. Asking for an attr
// the schema does not declare is a programming error (std::logic_error); a wrong type is a SchemaError naming the
// case and the attr. This is the only place attr values are read.
// The name of `known` nearest to `name` when it is a near miss (a few edits, or one name inside the other), else "".
std::string closest_name(const std::string& name, const std::vector<std::string>& known);

class AttrReader {
 public:
  AttrReader(const Case& c, const Schema& s, const Profile* profile = nullptr) : c_(c), s_(s), profile_(profile) {}
  std::int64_t i(const std::string& name) const;
  double f(const std::string& name) const;
  std::string s(const std::string& name) const;
  bool b(const std::string& name) const;
  bool has(const std::string& name) const;  // set on the case (not only defaulted)
  // The producer the case names (attr kernel / variant) or its stage's default, resolved once (profiles/profile.hpp);
  // null when none. Stages compare it with the profile objects (profiles/profiles.hpp) by identity.
  const Profile* profile() const { return profile_; }

 private:
  const AttrValue* value(const std::string& name) const;
  const Case& c_;
  const Schema& s_;
  const Profile* profile_ = nullptr;
};

}  // namespace dsa
