// A case: one kernel call (or one golden) of one stage, as stored in a schema-v1 HDF5 group.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>
#include <string>
#include <variant>
#include <vector>

#include "tensor/tensor.hpp"

namespace dsa {

using AttrValue = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>>;
using Attrs = std::map<std::string, AttrValue>;
using TensorMap = std::map<std::string, Tensor>;

std::string attr_to_string(const AttrValue& v);

// `s` made safe to print on one line: control characters (newline included) and bytes that are not valid UTF-8 are
// written as \xNN, so a name like "x\nerror: forged" cannot forge a line of our output or break XML.
std::string printable(std::string_view s);

struct Case {
  std::string file;   // path it was read from (for messages); empty for in-memory cases
  std::string name;   // HDF5 group name
  std::string stage;  // registry name, e.g. "indexer.logits_ragged"
  Attrs attrs;        // everything on the group except `stage` / `schema_version`
  TensorMap inputs;   // inputs/   — what the kernel was given
  TensorMap outputs;  // outputs/  — what the kernel under test produced
  TensorMap expected; // expected/ — golden reference (optional)
  // Layer dumps: input name -> "CASE/outputs/TENSOR" (or CASE/expected/TENSOR) of another case of the same file it was
  // taken from: an HDF5 hard or soft link to that dataset, or the attr `from:<input>` naming it (the reader resolves
  // both; the attr is not kept in `attrs`). The writer stores such an input as a hard link when the shapes agree.
  std::map<std::string, std::string> links;

  bool has_attr(const std::string& k) const { return attrs.count(k) != 0; }
  // Typed accessors with defaults; throw SchemaError naming the case and attr when the type is wrong.
  std::int64_t attr_int(const std::string& k, std::optional<std::int64_t> def = std::nullopt) const;
  double attr_float(const std::string& k, std::optional<double> def = std::nullopt) const;
  std::string attr_str(const std::string& k, std::optional<std::string> def = std::nullopt) const;
  bool attr_bool(const std::string& k, std::optional<bool> def = std::nullopt) const;

  const Tensor& input(const std::string& k) const;   // throws SchemaError if missing
  const Tensor* input_opt(const std::string& k) const;
  std::string where() const;  // "FILE: case 'NAME'"
};

// Every error about a user's input: carries file / case / tensor / expected / found.
struct Problem {
  std::string file;
  std::string case_name;
  std::string tensor;  // "inputs/q", "attr kernel", or "" for file-level problems
  std::string expected;
  std::string found;
  std::string str() const;  // one line
};

// Typed reading of one attr value (SchemaError naming the case and attr when the type is wrong).
std::int64_t attr_as_int(const Case& c, const std::string& k, const AttrValue& v);
double attr_as_float(const Case& c, const std::string& k, const AttrValue& v);
std::string attr_as_str(const Case& c, const std::string& k, const AttrValue& v);
bool attr_as_bool(const Case& c, const std::string& k, const AttrValue& v);

class SchemaError : public std::runtime_error {
 public:
  explicit SchemaError(Problem p) : std::runtime_error(p.str()), problem_(std::move(p)) {}
  const Problem& problem() const { return problem_; }

 private:
  Problem problem_;
};

}  // namespace dsa
