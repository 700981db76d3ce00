// libFuzzer target (issue #35 item 4): the bytes of one would-be `check --json` report go through everything `merge`
// and `report` do with it — the size and depth guards, the JSON parser, every field's type check (from_json, plots
// included) — and, when accepted, the merged report is rendered as console text, JSON, JUnit and HTML. In process,
// no HDF5, no fork: any crash, leak or sanitizer report is ours. Built by -DDSA_FUZZ=ON with clang (scripts/fuzz.sh);
// seeded with tests/fuzz/report_seeds/*.json (real reports: with and without plots, a layer, a failing run).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "tests/fuzz/fuzz_scratch.hpp"
#include "pipeline/check.hpp"
#include "report/console.hpp"
#include "report/html.hpp"
#include "io/text_file.hpp"
#include "report/json.hpp"
#include "report/junit.hpp"


extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dsa;
  const std::string& path = fuzz::scratch_path("report_", ".json");
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();  // the scratch file must be writable: a setup error, not a finding
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  std::vector<std::string> errors;
  // 1 MiB budget: the fuzzer's inputs are smaller; the guard itself is exercised by max_len inputs.
  const report::RunReport rep = pipeline::merge_reports({path, path}, errors, std::int64_t{1} << 20);
  if (!errors.empty()) {
    for (const auto& e : errors)
      if (e.empty()) std::abort();  // every refusal says why
    return 0;
  }
  std::ostringstream con;
  report::print_console(rep, con, false, 1, false);
  (void)io::json_text(report::report_json(rep));  // as check --json writes it
  (void)report::junit_xml(rep);
  (void)report::html_report(rep, "fuzz");
  (void)rep.exit_code();
  return 0;
}
