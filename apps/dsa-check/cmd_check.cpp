// `dsa-check check FILE...`: CLI wiring only (logic in src/pipeline/check.cpp and src/compare/).
#include <algorithm>
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "pipeline/check.hpp"

namespace dsa::cli {

void add_check(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("check", "Compare kernel dumps (outputs/, expected/) with the CPU reference, stage by stage");
  auto o = std::make_shared<pipeline::RunOptions>();
  auto rtol = std::make_shared<std::vector<std::string>>();
  auto atol = std::make_shared<std::vector<std::string>>();
  auto color = std::make_shared<std::string>("auto");
  cmd->add_option("files", o->files, "HDF5 dump files")->required();
  cmd->add_option("--profile", o->check.tol.policy, "tolerance profile for every bounded tensor (exact, fp32-reassoc, sm90-fp8, bf16-logits)");
  cmd->add_option("--rtol", *rtol, "relative tolerance, NAME:VALUE for one tensor or VALUE for all (repeatable)");
  cmd->add_option("--atol", *atol, "absolute tolerance, NAME:VALUE or VALUE (repeatable)");
  cmd->add_flag("--no-emulation", o->check.no_emulation,
                "judge bounded tensors by the bound only, even when the case's `kernel` has a bit-exact emulation");
  auto nan_bits = std::make_shared<std::string>("any");
  cmd->add_option("--nan-bits", *nan_bits,
                  "NaN codes in bytes-compared float tensors: any (default: every NaN code of a format equals every other) "
                  "or exact (the reference's bits)")
      ->check(CLI::IsMember({"any", "exact"}));
  cmd->add_flag("--deterministic", o->check.deterministic,
                "require identical top-k index tensors (order included) across all dumps of the same case name");
  cmd->add_flag("--invariance", o->check.invariance,
                "the same request (attr request_ids) across dumps -- prefill vs decode capture, alone vs in a batch -- must "
                "get identical bytes where the stages compare rows, and the same verdict everywhere (B19/B20)");
  cmd->add_option("--stage", o->stage_glob, "only cases whose stage matches this glob (e.g. 'indexer.logits*')");
  cmd->add_option("--case", o->case_glob, "only cases whose name matches this glob");
  cmd->add_option("-j,--jobs", o->jobs, "cases checked in parallel (report order stays deterministic)")->check(CLI::PositiveNumber);
  cmd->add_option("--threads", o->check.threads, "OpenMP threads of the reference (0 = default)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", o->quiet, "print only failing checks and the summary");
  cmd->add_flag("-v,--verbose", o->verbose, "print metrics, first/worst locations and notes per check");
  cmd->add_option("--color", *color, "colour the console: auto (TTY only), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  cmd->add_option("--max-memory", o->max_memory,
                  "bytes the tensors of one file may take (default: half the machine's memory); larger files are refused "
                  "with exit 2")
      ->check(CLI::PositiveNumber);
  auto stream_mib = std::make_shared<std::int64_t>(o->stream_over >> 20);
  cmd->add_option("--stream-over", *stream_mib,
                  "MiB: an output of a row-tiled stage (indexer.logits_*) larger than this is not loaded but streamed "
                  "from the file in row tiles (reference rows, compare, discard; same verdicts; 0 = always stream)")
      ->check(CLI::NonNegativeNumber)
      ->each([o](const std::string& v) { o->stream_over = std::min<std::int64_t>(std::stoll(v), std::int64_t{1} << 40) << 20; });
  cmd->add_option("--tile-rows", o->check.tile_rows, "rows per tile of a streamed output (0 = about 16 M elements per tile)")
      ->check(CLI::NonNegativeNumber);
  auto shard = std::make_shared<std::string>();
  cmd->add_option("--shard", *shard,
                  "I/N: check only shard I (0 <= I < N) of the cases, a stable partition by file path and case name "
                  "(for CI matrices; combine the --json reports with dsa-check merge)");
  auto backend = std::make_shared<std::string>("cpu");
  add_backend_option(cmd, *backend);
  cmd->add_option("--json", o->json_path, "write the full report as JSON to this file (atomically)");
  cmd->add_option("--junit", o->junit_path, "write a JUnit XML report to this file (one testcase per case x tensor)");
  cmd->add_option("--html", o->html_path,
                  "write a self-contained HTML report (error heatmaps, histograms, top-k band plots, the layer view) to this "
                  "file (atomically)");
  cmd->callback([o, rtol, atol, color, nan_bits, shard, backend, &rc] {
    if (!resolve_backend(*backend, o->check.backend)) {
      rc = 2;
      return;
    }
    try {
      for (const auto& s : *rtol) o->check.tol.rtol.push_back(pipeline::parse_tol_override(s));
      for (const auto& s : *atol) o->check.tol.atol.push_back(pipeline::parse_tol_override(s));
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      rc = 2;
      return;
    }
    if (!o->check.tol.policy.empty() && !find_tolerance_policy(o->check.tol.policy)) {
      std::cerr << "error: unknown tolerance profile '" << o->check.tol.policy << "' (known: " << tolerance_policy_names() << ")\n";
      rc = 2;
      return;
    }
    if (!shard->empty()) {
      const auto slash = shard->find('/');
      std::int64_t i = -1, n = 0;
      try {
        std::size_t a = 0, b = 0;
        i = std::stoll(shard->substr(0, slash), &a);
        n = slash == std::string::npos ? 0 : std::stoll(shard->substr(slash + 1), &b);
        if (a != slash || b != shard->size() - slash - 1) n = 0;
      } catch (const std::exception&) {
        n = 0;
      }
      if (n < 1 || n > 100000 || i < 0 || i >= n) {
        std::cerr << "error: --shard '" << *shard << "': expected I/N with 0 <= I < N (e.g. 0/4)\n";
        rc = 2;
        return;
      }
      o->shard_index = i;
      o->shard_count = n;
    }
    o->color = *color == "auto" ? -1 : (*color == "always" ? 1 : 0);
    o->check.nan = *nan_bits == "exact" ? cmp::NanPolicy::exact : cmp::NanPolicy::any_code;
    rc = pipeline::run_check_command(*o, std::cout, std::cerr);
  });
}

namespace {
// --max-report-mib (merge, report): a report file larger than this is refused before it is read (bounded memory).
std::shared_ptr<std::int64_t> add_max_report_option(CLI::App* cmd) {
  auto mib = std::make_shared<std::int64_t>(pipeline::kDefaultMaxReportBytes >> 20);
  cmd->add_option("--max-report-mib", *mib,
                  "MiB: a JSON report larger than this is refused (exit 2) before it is read; parsing takes about 2-3x the "
                  "file's size in memory (default 512)")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 20));
  return mib;
}
}  // namespace

void add_merge(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("merge",
                                 "Combine the --json reports of several check runs (e.g. --shard i/N) into one report with "
                                 "the exit code one run over all the cases would give");
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<std::string>();
  auto junit = std::make_shared<std::string>();
  auto quiet = std::make_shared<bool>(false);
  cmd->add_option("reports", *files, "JSON reports written by dsa-check check --json")->required();
  cmd->add_option("--json", *json, "write the merged report as JSON");
  cmd->add_option("--junit", *junit, "write the merged report as JUnit XML");
  auto html = std::make_shared<std::string>();
  cmd->add_option("--html", *html, "write the merged report as self-contained HTML");
  cmd->add_flag("-q,--quiet", *quiet, "print only failing checks and the summary");
  auto max_mib = add_max_report_option(cmd);
  cmd->callback([files, json, junit, html, quiet, max_mib, &rc] {
    rc = pipeline::run_merge_command(*files, *json, *junit, *quiet, std::cout, std::cerr, *html, *max_mib << 20);
  });
}

void add_report(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("report",
                                 "Render saved check --json reports (one run, or the shards of one: merged) as a self-contained "
                                 "HTML report; exit code as merge");
  auto files = std::make_shared<std::vector<std::string>>();
  auto html = std::make_shared<std::string>();
  cmd->add_option("reports", *files, "JSON reports written by dsa-check check --json")->required();
  cmd->add_option("--html", *html, "the HTML file to write (atomically)")->required();
  auto max_mib = add_max_report_option(cmd);
  cmd->callback([files, html, max_mib, &rc] {
    rc = pipeline::run_merge_command(*files, "", "", true, std::cout, std::cerr, *html, *max_mib << 20);
  });
}

}  // namespace dsa::cli
