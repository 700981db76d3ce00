// `dsa-check backend-diff`: run the reference of every case on two implementations (backend + thread count) and
// demand identical bytes for everything a comparator reads: each reference tensor's value, magnitude M, defined
// mask, kernel emulations, and for top-k the candidate scores, bounds, k-th values and the index maps. This is the
// determinism contract made executable (architecture.md): CPU with 1 vs N threads today, CPU vs CUDA once a stage
// fills impl[cuda].
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::pipeline {

struct Impl {
  Backend backend = Backend::cpu;
  int threads = 0;  // 0 = all
  std::string str() const;
};
// "cpu", "cpu:4", "cuda" -> Impl; std::invalid_argument with the accepted forms.
Impl parse_impl(const std::string& s);

struct DiffLine {
  std::string tensor;   // "logits", "logits.magnitude", "indices.scores", "logits.emulation[deepgemm-sm90]", ...
  std::string message;  // "" when identical
};
// Differences between two references of one case (empty = identical); `a` and `b` name the sides in messages.
std::vector<DiffLine> diff_expected(const Expected& ea, const Expected& eb, const std::string& a, const std::string& b);
// Differences between the references of one valid case on two implementations (empty = identical). The case's kernel
// profile emulation is computed on both sides. Throws what run_reference throws.
std::vector<DiffLine> diff_references(const Case& c, const Impl& a, const Impl& b);

struct BackendDiffOptions {
  std::vector<std::string> files;
  Impl a{Backend::cpu, 1}, b{Backend::cpu, 0};
};
// Returns the exit code: 0 all identical, 1 any difference, 2 any I/O / schema / reference error.
int run_backend_diff(const BackendDiffOptions& o, std::ostream& out, std::ostream& err);

}  // namespace dsa::pipeline
