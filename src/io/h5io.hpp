// Schema v1 HDF5 dump I/O.
//
// A file holds one or more cases: every top-level group with a `stage` attribute. A case group has attrs
// (`schema_version` = 1, `stage`, model config, layout names) and subgroups `inputs/`, `outputs/`, `expected/`.
// bf16 / fp16 / fp8 tensors are datasets of raw uint16 / uint8 bits with a string attribute `dtype`
// (bf16, fp16, fp8_e4m3fn, fp8_e5m2); int8 is native int8; everything else native HDF5 types (a `dtype` attr on
// them is optional and, when present, must agree). Datasets we write are chunked with shuffle + gzip.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tensor/case.hpp"

namespace dsa::io {

inline constexpr std::int64_t kSchemaVersion = 1;

// Attr prefix of a layer dump's named link: attr `from:q` = "CASE/outputs/TENSOR" (Case::links).
inline constexpr const char* kLinkAttrPrefix = "from:";

struct ReadResult {
  std::vector<Case> cases;        // cases that loaded (possibly with schema problems, see `problems`)
  std::vector<Problem> problems;  // every I/O and schema problem found, one per line
  bool ok() const { return problems.empty(); }
};

// Half of the machine's physical memory (at least 1 GiB): the default budget for the tensors of one file.
std::int64_t default_memory_budget();

struct ReadOptions {
  // Validation of each loaded case (the stage table's, injected by src/pipeline/load.hpp: io knows no stage), and
  // the attr defaults to add. Empty = none.
  std::function<std::vector<Problem>(const Case&, bool check_outputs)> validate;
  std::function<void(Case&)> defaults;
  // Outputs/expected tensors not to load but to read in row tiles later (Tensor::deferred, rows()): asked per tensor
  // with the case (attrs and stage read), the group ("outputs" | "expected"), the name and the byte size. Empty = none.
  std::function<bool(const Case&, const std::string& group, const std::string& tensor, std::int64_t nbytes)> defer;
  bool load_outputs = true;    // read outputs/ and expected/ too
  bool apply_defaults = true;  // add the defaults to each case (off: attrs exactly as stored; validation sees them)
  std::int64_t max_bytes_per_tensor = std::int64_t{64} << 30;  // refuse absurd sizes before allocating
  std::int64_t max_total_bytes = default_memory_budget();      // all tensors of one file (--max-memory)
  // Parse the file first in a child process (fork): the HDF5 library itself can crash or loop on a corrupt file
  // (a mangled global-heap address in a string attribute segfaults inside H5Aread in HDF5 1.10). The child walks
  // every group, attribute and dataset the real read will touch (and reads the data when the file is at most
  // isolate_data_bytes); if it dies by a signal or does not finish in time (isolate_timeout_s, 0 = 10 s plus 1 s
  // per 8 MiB of file read in full, per 256 MiB walked), the file is reported as corrupt and never parsed in this
  // process (HDF5 1.10 loops forever on some mangled global heaps). Off in the fuzz harness (it must see the crash
  // itself).
  bool isolate = true;
  std::int64_t isolate_data_bytes = std::int64_t{256} << 20;
  int isolate_timeout_s = 0;
  bool metadata_only = false;  // internal: the child's walk without the data of big files
  bool parallel_inflate = true;  // gzip/shuffle chunks inflated on all cores (io/h5chunks.hpp)
  bool chunk_walk = false;       // internal (the child): such chunks fetched raw, not inflated
};

// Reads every case of a file. Never throws for bad input: problems are returned (every problem of the file,
// one per line: file-level, per case, per tensor, then opt.validate of each case). opt.defaults is applied to every
// case (unless opt.apply_defaults is false; validation always sees them). Use pipeline::load_file for a file
// validated against the stage table.
ReadResult read_file(const std::string& path, const ReadOptions& opt = {});

// Writes cases to `path` atomically (temp file in the same directory, then rename; a symlink is followed, anything
// but a regular file or a new name is refused, and so is any of `inputs`: io/paths.hpp). Throws
// std::runtime_error with the path on failure and leaves no partial file behind.
void write_file(const std::string& path, const std::vector<Case>& cases, const std::vector<std::string>& inputs = {});

// Test hook: if set, called before the final rename; throwing from it simulates a failing writer (disk full).
extern std::function<void(const std::string& tmp_path)> g_before_rename_hook;

}  // namespace dsa::io
