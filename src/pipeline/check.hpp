// `dsa-check check`: read files -> for each case the stage reference -> comparators -> verdicts -> reports.
// Exit code: 2 when any I/O / schema / usage problem or check ERROR, else 1 when any check failed, else 0.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "pipeline/check_case.hpp"
#include "report/run_report.hpp"

namespace dsa::pipeline {

using report::RunReport;

struct RunOptions {
  std::vector<std::string> files;
  CheckOptions check;
  std::string stage_glob, case_glob;  // fnmatch patterns ("" = all)
  int jobs = 1;                       // cases checked in parallel (report order is the file/case order)
  bool quiet = false;                 // console: failing lines and the summary only
  int verbose = 0;                    // console: notes, first/worst locations, all metrics
  int color = -1;                     // -1 auto (stdout is a TTY), 0 never, 1 always
  std::string json_path, junit_path;
  std::string html_path;              // --html: the self-contained HTML report (check.plots is set with it)
  std::int64_t max_memory = 0;        // bytes of tensors one file may load (0 = io::default_memory_budget())
  std::int64_t shard_index = 0, shard_count = 1;  // --shard i/N: only the cases with shard_of(...) == i (a layer: its first case's)
  // Outputs of a row-tiled stage (Stage::tiling) bigger than this many bytes are not loaded but streamed in row tiles
  // (--stream-over, MiB on the CLI; 0 = stream every such output).
  std::int64_t stream_over = std::int64_t{256} << 20;
};

// Runs every check; never throws for bad input. `progress(done, total, case)` is called after each case.
using ProgressFn = std::function<void(std::size_t done, std::size_t total, const Case& last)>;
RunReport run_checks(const RunOptions& o, const ProgressFn& progress = {});
// The checks of run_checks over cases already in memory (validated here; no files read, o.files unused): local
// checks, layers, run-wide checks, first divergence. Used by the structured fuzz target; never throws for bad input.
RunReport check_cases(std::vector<Case> cases, const RunOptions& o);

// The whole command: checks, console report on `out`, problems on `err`, JSON / JUnit files. Returns the exit code.
int run_check_command(const RunOptions& o, std::ostream& out, std::ostream& err);


// First-divergence analysis of results: per file, cases grouped by their `step` (or the whole file when no case has
// one); in each group holding >= 2 stages, the failing stage with the lowest pipeline_order.
std::vector<std::string> first_divergence(const std::vector<cmp::CheckResult>& results);

// The shard (0..count-1) of a case: a hash of its file path (as given) and name, stable across runs and machines.
std::int64_t shard_of(const std::string& file, const std::string& case_name, std::int64_t count);

// `dsa-check merge`: the reports `check --json` wrote (e.g. one per shard) as one run: results and problems in the
// given order, first divergence recomputed; `errors` gets unreadable reports. A report is hostile input: a file
// above max_report_bytes is refused before it is read, JSON nested deeper than kMaxReportDepth before it is parsed,
// and every field is type-checked (the message names the file, the field, what was expected and what was found).
constexpr std::int64_t kDefaultMaxReportBytes = std::int64_t{512} << 20;  // --max-report-mib 512
constexpr int kMaxReportDepth = 64;                                        // a real report nests 7 deep
RunReport merge_reports(const std::vector<std::string>& files, std::vector<std::string>& errors,
                        std::int64_t max_report_bytes = kDefaultMaxReportBytes);
// The whole merge command: console summary, JSON / JUnit, the exit code one run over all the cases would give (2 also
// for an unreadable report, and then no output is written: a merge missing a shard would pass for the whole run).
int run_merge_command(const std::vector<std::string>& files, const std::string& json_path, const std::string& junit_path,
                      bool quiet, std::ostream& out, std::ostream& err, const std::string& html_path = "",
                      std::int64_t max_report_bytes = kDefaultMaxReportBytes);

}  // namespace dsa::pipeline
