// libFuzzer target: the bytes of one would-be dump file go through everything `dsa-check check` does before and
// around the reference — HDF5 reader (link policy, storage checks, memory budget), schema validation, the stage's
// parse — and, for small valid cases, the reference and the comparators (outputs and expected/). Every problem is
// formatted as the CLI would print it (escaping of hostile names). Built by -DDSA_FUZZ=ON with clang (see
// scripts/fuzz.sh); seeded with golden/*.h5 and tests/hostile/corpus/*.h5.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/fuzz/fuzz_scratch.hpp"
#include "pipeline/check_case.hpp"
#include "pipeline/load.hpp"


extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace dsa;
  const std::string& path = fuzz::scratch_path("", ".h5");
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  io::ReadOptions opt = pipeline::read_options();
  opt.isolate = false;  // the fuzzer must see a crash itself (scripts/fuzz.sh sorts HDF5-internal ones out)
  opt.max_total_bytes = std::int64_t{64} << 20;  // a fuzzer must not be able to make us allocate more
  opt.max_bytes_per_tensor = std::int64_t{32} << 20;
  const io::ReadResult r = pipeline::load_file(path, opt);
  std::size_t sink = 0;
  for (const auto& p : r.problems) sink += p.str().size();
  if (!r.ok()) return static_cast<int>(sink & 0);
  for (const auto& c : r.cases) {
    std::int64_t bytes = 0;
    for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
      for (const auto& [n, t] : *g) bytes += t.nbytes();
    if (bytes > (std::int64_t{1} << 14)) continue;  // bounded work per input (the reference at size is for benchmarks)
    pipeline::CheckOptions o;
    o.threads = 1;
    for (const auto& res : pipeline::check_case(c, o)) sink += res.message.size();
  }
  return static_cast<int>(sink & 0);
}
