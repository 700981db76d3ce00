// The checks of one case: bind it to its stage once, run the stage reference once (with the emulation of the kernel
// profile the case names), then each outputs/<name> and expected/<name> through the comparator of its CompareKind.
//
// Emulation policy: when a case declares `kernel` (e.g. deepgemm-sm90, a profile that emulates the stage), the
// output must be BIT-EXACT against the emulation. A mismatch is a FAIL even when the output is within the bound
// ("not bit-exact vs deepgemm-sm90 emulation (N elements); within sm90-fp8 bound"): the kernel did something
// other than what it claims. `--no-emulation` judges by the bound only. Goldens (expected/) are judged by the
// bound when they are not the emulation.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compare/compare.hpp"
#include "stage/stage.hpp"

namespace dsa::pipeline {

// Options of one check (CLI flags).
struct CheckOptions {
  ToleranceOverrides tol;      // --profile, --rtol, --atol
  bool no_emulation = false;   // judge by the bound only
  cmp::NanPolicy nan = cmp::NanPolicy::any_code;  // --nan-bits any|exact
  bool deterministic = false;  // identical index tensors across dumps of one case
  // --invariance: the same request (attr request_ids) in several cases -- a prefill and a decode capture, alone and
  // in a batch -- must get the same verdict, and the stages' row-identity cross-checks must find rows to compare.
  bool invariance = false;
  bool plots = false;  // collect PlotData for the HTML report (check --html)
  int threads = 0;             // reference threads
  int hint_samples = 64;       // failing elements each hypothesis (Stage::hypotheses) is evaluated at, at most
  Backend backend = Backend::cpu;
  // Row-tiled checks (Stage::tiling) of outputs the reader deferred (RunOptions::stream_over): rows per tile
  // (0 = about 16 M elements per tile, rounded to the stage's alignment), and a callback after each tile.
  std::int64_t tile_rows = 0;
  std::function<void(const Case& c, std::int64_t rows_done, std::int64_t rows)> row_progress;
};
// Parse "logits:1e-3" or "1e-3"; throws std::invalid_argument with a clear message.
std::pair<std::string, double> parse_tol_override(const std::string& s);

// The kernel profile whose emulation a case's outputs must match: its `kernel` attr (when the profile emulates the
// stage), unless --no-emulation. Null otherwise.
const Profile* requested_emulation(const BoundCase& b, const CheckOptions& o);

// The options the reference of a case is run with for a check: threads, and the emulation its kernel asks for.
RefOptions reference_options(const BoundCase& b, const CheckOptions& o);
// Where a check runs the case's reference: o.backend, or the CPU for a stage without an implementation there (every
// backend gives the same bytes; `backend-diff` is where a missing implementation is an error). With the note saying so.
Backend reference_backend(const BoundCase& b, const CheckOptions& o);
std::string backend_fallback_note(const BoundCase& b, const CheckOptions& o);  // "" when o.backend runs it

// The ERROR result of a case that could not be checked (group "case", `tensor` or "-", the message whole).
cmp::CheckResult case_error(const Case& c, const std::string& tensor, const std::string& msg);

// Shape/dtype check, then the comparator of ref.kind, emulation handling, sanity checks. Never throws.
cmp::CheckResult compare_tensor(const BoundCase& b, const std::string& group, const Tensor& out, const RefTensor& ref,
                                const CheckOptions& o);

// Every check of one case: validation and binding, the reference (once), then each outputs/<name> and
// expected/<name>. Errors (invalid case, reference throws, no outputs) become one ERROR result.
std::vector<cmp::CheckResult> check_case(const Case& c, const CheckOptions& o);
// As check_case, for a case already validated and bound (its Params parsed once, e.g. while reading the file).
std::vector<cmp::CheckResult> check_case(const BoundCase& b, const CheckOptions& o);
// As check_case, with the reference already computed as run_reference(b, reference_options(b, o)).
std::vector<cmp::CheckResult> check_case(const BoundCase& b, const CheckOptions& o, const Expected& reference);

// The text after "<bug>" in a hypothesis hint.
inline constexpr const char* kHypothesisMatch = ": the output matches a kernel with this bug";
// Hints from the stage's hypotheses (known bugs as values) on a failing bounded output.
std::vector<std::string> hypothesis_findings(const BoundCase& b, const Tensor& out, const RefTensor& ref, const cmp::Tolerance& tol);
// Reference-free sanity findings on an output tensor: the RefTensor's expectations (B5 finite positive scales, B6
// constant logit rows), the stage's own (Stage::sanity), B22 positional top-k. Findings the reference itself
// exhibits are dropped. A finding that starts with kNotePrefix (stage.hpp) is a note, never a hint.
std::vector<std::string> sanity_findings(const BoundCase& b, const std::string& tensor, const Tensor& out, const RefTensor* ref);

}  // namespace dsa::pipeline
