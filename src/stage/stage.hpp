// The Stage type and THE stage table (table.cpp): one line per stage. A stage is one folder,
// src/stages/<family>/<stage>/, holding everything about it:
//   stage.hpp   its Params and the declarations its files share (cpu(), cuda(), generators, mutants)
//   stage.cpp   the schema (engine tensor names), parse(Case) -> Params (every attr and cross-tensor rule checked
//               once), the table entry (`Stage <family>::<stage>::stage()`)
//   core.hpp    only the DSA_HD bodies cpu.cpp and cuda.cu both call (same operations, same order)
//   cpu.cpp     the OpenMP reference: impl[Backend::cpu](Case inputs, Params) -> Expected
//   cuda.hpp / cuda.cu / cuda.cpp   the kernel interface, the kernels, the host side with Expected cuda(...)
//   golden.cpp  input generators + golden catalogue rows      mutants.cpp  selftest cases and mutants (real bugs)
// (docs/architecture.md; shared computation lives in src/engines/, never in another stage's folder)
// The CLI, the reader, `golden`, `selftest`, `backend-diff` and the docs (`dsa-check stages --json`) all read the
// table; comparators and reports never name a stage.
#pragma once
#include <omp.h>

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "compare/compare.hpp"
#include "profiles/profile.hpp"
#include "schema/schema.hpp"
#include "tensor/expected.hpp"
#include "stage/golden_spec.hpp"
#include "tensor/case.hpp"

namespace dsa {

// Where a reference runs. Every backend of a stage must give the same bytes (`dsa-check backend-diff`).
enum class Backend { cpu = 0, cuda = 1 };
inline constexpr std::size_t kBackends = 2;
std::string_view backend_name(Backend b);
// The backend a name gives ("cpu", "cuda"), nullopt for any other word; backend_names() lists them for messages and
// option checks.
std::optional<Backend> parse_backend(std::string_view name);
const std::vector<std::string>& backend_names();

// Options every reference implementation receives.
struct RefOptions {
  int threads = 0;                    // 0 = OpenMP default
  int thread_count() const { return threads > 0 ? threads : omp_get_max_threads(); }
  const Profile* emulation = nullptr;  // kernel profile to emulate in addition to the exact value (RefTensor::emulations)
  bool emulates(const Profile& profile) const { return emulation == &profile; }
  // Stages with a RowTiling: compute only rows [row_begin, row_end) of the tiled output (row_end < 0 = all rows).
  // The RefTensor then holds those rows, with flat_offset = row_begin * (elements per row).
  std::int64_t row_begin = 0, row_end = -1;
  std::int64_t rows_end(std::int64_t rows) const { return row_end < 0 ? rows : row_end; }
  // Layer chains (pipeline/layer.hpp): input name -> f64 per-element bound u (same element count as the input) of
  // how far the kernel's upstream output may lie from the value the reference is given (the upstream's own error
  // bound). A stage whose verdict depends on input ties (indexer.topk) widens its band by it; others ignore it.
  std::map<std::string, Tensor> input_bounds;
};

// Parsed, validated options of one case for one stage. Each stage derives its own (in its stage.hpp); references
// read attrs only through it.
struct Params {
  virtual ~Params() = default;
  // Tolerance policy this case's options call for (e.g. bf16-logits for bf16 logits), "" = the profile's / stage's.
  virtual std::string tolerance_policy() const { return ""; }
};
using ParamsPtr = std::shared_ptr<const Params>;

// parse: stage-specific rules on a case that passed the schema check (attrs read through `a`, which knows the
// declared defaults); appends every problem found, returns the Params (null when a problem was found).
using ParseFn = std::function<ParamsPtr(const Case& c, const AttrReader& a, std::vector<Problem>& problems)>;
// A reference implementation: the case supplies the tensors, Params the options.
using ImplFn = std::function<Expected(const Case& c, const Params& p, const RefOptions& opt)>;
// Reference-free findings on a kernel output beyond the RefTensor flags (e.g. the K cache's written scales, B5).
// A sanity finding that starts with kNotePrefix is a fact about the case's inputs: listed as a note, never as a hint.
inline constexpr const char* kNotePrefix = "note: ";
using SanityFn = std::function<void(const Case& c, const std::string& tensor, const Tensor& out, std::vector<std::string>& findings)>;

// Consistency across the cases of one run (every file `check` reads): e.g. the same request processed by different
// step splits or batch compositions must give identical rows. Receives the valid cases of the stage that hold
// outputs; returns results of group "consistency" (one also when nothing repeats: "0 repeated row(s) compared").
using CrossCheckFn = std::function<std::vector<cmp::CheckResult>(const std::vector<const Case*>& cases)>;

// The one result of a cross-check over rows repeated across calls (bytes, group "consistency"): BITEXACT "<pairs>
// <pass_what>" (pairs = 0: "0 repeated row(s) compared: ...", numel 0) or FAIL "<bad> of <pairs> <fail_what><first>".
std::vector<cmp::CheckResult> repeated_rows_result(const std::string& stage, const std::string& tensor, const std::string& case_name,
                                                   const std::string& file, std::int64_t pairs, std::int64_t bad,
                                                   const std::string& fail_what, const std::string& first, const std::string& pass_what);

// A known bug as a value: what a kernel with that bug writes at one element of a bounded output. When a bounded
// output FAILs, `check` evaluates it at a sample of the failing elements and names the bug when the kernel output
// matches it there (a hint, never a verdict).
struct Hypothesis {
  std::string tensor;  // the bounded output it explains
  std::string bug;     // B-number(s) of validation_anchors.md / real_bugs_2026.md
  std::string doc;     // "head scores summed without ReLU"
  // The buggy kernel's value at flat index `flat` (exact or in f64) and its magnitude M (the bound of a kernel
  // with the bug is rtol * M + atol, like a correct kernel's), or nullopt where the element is not defined.
  struct Value {
    double value, magnitude;
  };
  std::function<std::optional<Value>(const Case& c, const Params& p, std::int64_t flat)> value;
  // A bytes output (cache writers): the whole output of a kernel with the bug, or nullopt where the bug cannot show on
  // this case. `check` names the bug when the output equals it on at least 90 % of the bytes where it differs from
  // the reference.
  std::function<std::optional<Tensor>(const Case& c, const Params& p)> bytes;
};

// A stage's known bugs as hypotheses on one tensor: rows {bug, B-number, doc}, each completed by fill(hypothesis, bug)
// (which sets its value or bytes function for that bug).
template <class Bug>
struct BugHint {
  Bug bug;
  const char* id;
  const char* doc;
};
template <class Bug, class Fill>
std::vector<Hypothesis> bug_hints(const char* tensor, const std::vector<BugHint<Bug>>& rows, Fill fill) {
  std::vector<Hypothesis> v;
  for (const BugHint<Bug>& r : rows) {
    Hypothesis x;
    x.tensor = tensor;
    x.bug = r.id;
    x.doc = r.doc;
    fill(x, r.bug);
    v.push_back(std::move(x));
  }
  return v;
}

// A selftest mutant: a real bug's shape applied to plausible outputs of a base case, and the verdicts that count as
// "caught with the right kind".
struct Mutant {
  std::string name;                   // unique, used as the mutated case's name
  std::string bug;                    // B-number(s) of validation_anchors.md §4
  std::string base;                   // name of the stage's selftest case it mutates
  std::vector<cmp::Verdict> expect;
  std::string doc;
  // Mutates the outputs of `c` (which hold plausible outputs of reference `E`); see src/stage/mutant_kit.hpp.
  std::function<void(Case& c, const Expected& E, std::uint64_t seed)> apply;
  // The Stage::hypotheses bug `check` must name in a hint on this mutant ("" = none may be named).
  std::string diagnosis = {};
};

// A stage whose single output is a stack of independent rows along dim 0 (e.g. logits: one row per query) can be
// checked in row tiles: `check` streams a big output from the file, tile by tile (reference rows -> compare ->
// discard), so that peak memory is O(inputs + tile). The impl honours RefOptions::row_begin/row_end; tiles start at
// multiples of align(case) rows.
struct RowTiling {
  std::string tensor;
  std::function<std::int64_t(const Case& c, const Params& p)> align;
};

struct Stage {
  std::string name;                 // "indexer.logits_ragged"
  std::string summary;              // one line
  std::string spec;                 // spec section, e.g. "v32 §3.2"
  std::string formula;              // what the stage computes, one line (`dsa-check stages NAME`)
  int pipeline_order = 0;           // position in the DSA data flow = its line in THE table (set by the table)
  std::string default_profile;      // the producer assumed when a case names none (attr kernel / variant); "" = none
  std::string profile_doc;          // what each serving profile's arithmetic means on this stage (the kernel attr's doc)
  Schema schema;
  ParseFn parse;
  std::array<ImplFn, kBackends> impl;   // impl[Backend::cpu] always; impl[Backend::cuda] when built
  std::string default_tolerance = "exact";  // tolerance policy of bounded outputs without a kernel profile
  SanityFn sanity;                  // may be empty
  std::vector<golden::Generator> generators;
  std::vector<golden::GoldenSpec> goldens;     // catalogue rows (committed or on demand)
  std::vector<golden::GoldenSpec> selftest;    // small cases the mutants start from (same generators)
  std::vector<Mutant> mutants;
  std::vector<Hypothesis> hypotheses;  // known bugs `check` tests a failing bounded output against
  CrossCheckFn cross_check;            // may be empty
  std::vector<std::string> cross_with;  // other stages whose valid cases (with outputs) cross_check also receives
  // The provenance attrs cross_check keys on: a case carrying none of them takes no part in it beyond being counted
  // (it may be passed as a shell whose tensors are undefined), so `check` over many files does not keep its tensors.
  std::vector<std::string> cross_attrs;
  std::optional<RowTiling> tiling;     // row-tiled (streamed) checks of big outputs

  const ImplFn* impl_for(Backend b) const;    // null when the backend has no implementation of this stage
  std::vector<std::string> emulated_by() const;  // profiles that emulate this stage
};

// THE table (built once, immutable), in pipeline order.
const std::vector<Stage>& stages();
// What the table does to its lines once: pipeline_order = the line's position; the attrs naming the producer
// (kernel / variant, profiles/profile.hpp) declared for every stage a profile serves.
std::vector<Stage> finish_table(std::vector<Stage> lines);
const Stage* find_stage(const std::string& name);
std::string stage_names();  // "indexer.quant, indexer.prolog, ..." for messages

// A case bound to its stage: the table looked up once and the attrs parsed once.
struct BoundCase {
  const Case* c = nullptr;
  const Stage* stage = nullptr;
  ParamsPtr params;
  const Profile* profile = nullptr;  // the producer the case names (attr kernel / variant) or the stage's default
};

// Full validation of a case: the stage exists, the schema check, then the stage's parse. Returns every problem
// (empty = valid) and, when valid, the bound case. `check_outputs` also validates outputs/ and expected/.
std::vector<Problem> validate_case(const Case& c, bool check_outputs = true, BoundCase* bound = nullptr);

// Binds and runs the reference of a case (std::runtime_error / SchemaError naming the case when it is invalid or
// the backend has no implementation).
Expected run_reference(const Case& c, const RefOptions& opt = {}, Backend backend = Backend::cpu);
Expected run_reference(const BoundCase& b, const RefOptions& opt = {}, Backend backend = Backend::cpu);

// A stage's parse() refuses a case whose reference would need more memory (outputs, bounds and workspace, an
// estimate in bytes) than the default budget (io::default_memory_budget(), half the machine's memory): a small
// hostile file must not make the reference allocate gigabytes. Appends the problem; returns false when refused.
bool check_reference_memory(const Case& c, double bytes, const std::string& what, std::vector<Problem>& problems);
// The same for time: a reference whose work (multiply-adds, an estimate from the shapes and metadata) exceeds both
// 2^34 and 2^16 per byte of the case's inputs is refused -- a small file whose metadata (a window of 2^20 tokens
// over a table aliasing one block, say) would keep the reference busy for hours. Real dumps do far less work per
// input byte (an 8K-token V4 prefill: ~10^3). Appends the problem; returns false when refused.
bool check_reference_work(const Case& c, double fma, const std::string& what, std::vector<Problem>& problems);

// Cache writers' slot_mapping rule: every entry -1 (padded token, skipped) or a slot in [0, capacity), and no two
// tokens storing into one slot (the result would depend on write order). Appends the first violation.
void check_slot_mapping(const Case& c, const Tensor& slots, std::int64_t capacity, const std::string& capacity_doc,
                        std::vector<Problem>& problems);

// Adds the case's stage's declared attr defaults and its default producer (attr variant) when the case names none
// (no-op for an unknown stage).
void apply_attr_defaults(Case& c);

// The producer profile of a case (attr `kernel` / `variant`, else its stage's default), or null when it names none
// or an invalid one (validate_case reports that).
const Profile* kernel_profile(const Case& c);
// The profile a bound case's reference emulates: its producer when that profile emulates the stage, else null.
const Profile* emulated_profile(const BoundCase& b);

// User overrides of tolerances (CLI --profile, --rtol, --atol): bare values apply to every tensor, NAME:VALUE to one.
struct ToleranceOverrides {
  std::string policy;
  std::vector<std::pair<std::string, double>> rtol, atol;
};
// Tolerance of `tensor` of a bound case: the override policy, else what the case's Params call for, else its kernel
// profile's, else the stage default; then per-tensor (or bare) overrides. std::invalid_argument for an unknown policy.
cmp::Tolerance resolve_tolerance(const BoundCase& b, const std::string& tensor, const ToleranceOverrides& o = {});

// Builds a Stage's parse from a typed parser `P parse(const Case&, const AttrReader&, std::vector<Problem>&)`
// returning the stage's Params type, and an ImplFn from `Expected impl(const Case&, const P&, const RefOptions&)`.
template <class P>
ParseFn typed_parse(P (*fn)(const Case&, const AttrReader&, std::vector<Problem>&)) {
  return [fn](const Case& c, const AttrReader& a, std::vector<Problem>& problems) -> ParamsPtr {
    const std::size_t before = problems.size();
    auto p = std::make_shared<P>(fn(c, a, problems));
    if (problems.size() != before) return nullptr;
    return p;
  };
}
template <class P>
ImplFn typed_impl(Expected (*fn)(const Case&, const P&, const RefOptions&)) {
  return [fn](const Case& c, const Params& p, const RefOptions& o) { return fn(c, dynamic_cast<const P&>(p), o); };
}

}  // namespace dsa
