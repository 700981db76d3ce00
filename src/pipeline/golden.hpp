// Golden data: catalogue case -> inputs (generator) -> reference (registry) -> schema-v1 HDF5 with inputs/ and
// expected/, plus a MANIFEST of SHA-256 digests of every dataset's raw bytes.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::golden {

// The inputs and attrs of one catalogue case (its generator, poison, provenance attrs), no reference.
Case generate_inputs(const GoldenSpec& spec, std::optional<std::uint64_t> seed, int threads);
// Validates a generated case (`what` names it in errors), runs its stage reference and fills expected/.
Case with_reference(Case c, const std::string& what, int threads, Expected* reference = nullptr, Backend backend = Backend::cpu);
// Inputs + expected/ of one catalogue case (`reference`, if given, receives the stage reference with what the
// comparators need). `seed` overrides the spec's seed. Throws std::runtime_error (with
// the case name) when the generator or the stage reference fails.
Case make_case(const GoldenSpec& spec, std::optional<std::uint64_t> seed, int threads, Expected* reference = nullptr,
                Backend backend = Backend::cpu);

// Lowercase hex SHA-256 of a byte range (OpenSSL).
std::string sha256_hex(const void* data, std::size_t n);

// MANIFEST lines of one case written to `file` (its name relative to the output dir), sorted:
//   <file> <case>/<group>/<tensor> <dtype> <shape> <sha256 of the raw little-endian row-major bytes>
//   <file> <case>/attrs - - <sha256 of the canonical "key=value\n" attr text, stage and schema_version included>
std::vector<std::string> manifest_lines(const std::string& file, const Case& c);

struct GoldenOptions {
  std::string out_dir;
  std::optional<std::uint64_t> seed;  // overrides every case's seed
  int threads = 0;                    // 0 = OpenMP default
  Backend backend = Backend::cpu;     // where the references run (every backend gives the same bytes)
  std::function<void(std::size_t done, std::size_t total, const std::string& name)> progress;  // may be empty
};

// Writes <out_dir>/<name>.h5 for every spec and <out_dir>/MANIFEST (merged: lines of files not regenerated
// are kept). All files are staged in a temp dir inside out_dir and moved in only when every case succeeded;
// on any failure nothing new is left in out_dir and std::runtime_error says why. Returns the file names.
// Layer goldens (pipeline/layers.hpp) are written the same way, one file per layer holding its member cases.
struct LayerSpec;
std::vector<std::string> write_goldens(const std::vector<const GoldenSpec*>& specs, const GoldenOptions& opt,
                                       const std::vector<const LayerSpec*>& layers = {});

// Parses a seed: decimal or 0x-hex, 0 <= seed < 2^64. Throws std::invalid_argument with a clear message.
std::uint64_t parse_seed(const std::string& s);

}  // namespace dsa::golden

namespace dsa::golden {

// The demo pair (scripts/demo.sh, golden/demo/): demo_pass.h5 holds committed goldens whose outputs/ are a
// plausible kernel result (selftest::plausible_outputs: logits perturbed inside the sm90 bound, in-band top-k
// swaps); demo_fail.h5 holds the same cases with a seeded bug (selftest mutants: ReLU missing, sparsity not
// engaged). Writes both and DIR/MANIFEST atomically (same rules as write_goldens). Returns the file names.
std::vector<std::string> write_demo(const std::string& out_dir, std::uint64_t seed, int threads);

}  // namespace dsa::golden
