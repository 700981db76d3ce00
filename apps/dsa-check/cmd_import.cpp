// `dsa-check import`: dumps engines already wrote (Ascend msprobe, sglang Pass files, .pt / safetensors dicts) into a
// schema-v1 file through a mapping. The importer is the Python kit's (scripts/dsa_dump: dsa_dump.importer, which reads
// .pt files without torch and writes through the kit's validated writer); this subcommand runs it with every argument
// unchanged, in place of this process, so its exit code (0, or 2 for any bad input) is ours.
//   Python: $DSA_PYTHON, else the python3 beside this binary (a virtual environment's bin/), else python3 on PATH. The kit: $DSA_DUMP_KIT (a folder holding the dsa_dump package), else
//   <bin>/../share/dsa-check/python (an installed tree), else this source tree's scripts/dsa_dump, else whatever
//   dsa_dump the Python finds itself (pip install). The kit validates what it writes with this same binary
//   ($DSA_CHECK_BIN, unless already set).
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "apps/dsa-check/commands.hpp"

#ifndef DSA_KIT_SOURCE_DIR
#define DSA_KIT_SOURCE_DIR ""
#endif

namespace dsa::cli {
namespace {

namespace fs = std::filesystem;

std::string self_exe() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.string();
}

bool holds_kit(const fs::path& dir) {
  std::error_code ec;
  return !dir.empty() && fs::is_regular_file(dir / "dsa_dump" / "importer.py", ec);
}

std::string kit_dir(const std::string& exe) {
  if (const char* e = std::getenv("DSA_DUMP_KIT"); e && *e) return e;
  if (!exe.empty()) {
    const fs::path installed = fs::path(exe).parent_path().parent_path() / "share" / "dsa-check" / "python";
    if (holds_kit(installed)) return installed.string();
  }
  if (holds_kit(DSA_KIT_SOURCE_DIR)) return DSA_KIT_SOURCE_DIR;
  return "";
}

int run_import(const std::vector<std::string>& args) {
  const std::string exe = self_exe();
  const std::string kit = kit_dir(exe);
  if (!kit.empty()) {
    const char* old = std::getenv("PYTHONPATH");
    const std::string pp = kit + (old && *old ? ":" + std::string(old) : "");
    ::setenv("PYTHONPATH", pp.c_str(), 1);
  }
  if (!exe.empty()) ::setenv("DSA_CHECK_BIN", exe.c_str(), 0);
  // $DSA_PYTHON, else the Python beside this binary (a virtual environment's bin/, where pip put us), else python3.
  const char* py_env = std::getenv("DSA_PYTHON");
  std::string py = py_env && *py_env ? py_env : "python3";
  if (!(py_env && *py_env) && !exe.empty()) {
    const fs::path beside = fs::path(exe).parent_path() / "python3";
    if (::access(beside.c_str(), X_OK) == 0) py = beside.string();
  }
  std::vector<std::string> argv_s{py, "-m", "dsa_dump.importer"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(py.c_str(), argv.data());
  const int err = errno;
  std::cerr << "error: dsa-check import runs the Python kit's importer (" << py << " -m dsa_dump.importer), but " << py
            << " could not be started: " << std::strerror(err)
            << "; install Python 3 with numpy and h5py (or set DSA_PYTHON to one), or run `pip install dsa-check`\n";
  return 2;
}

}  // namespace

void add_import(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("import",
                                 "Turn dumps engines already wrote (Ascend msprobe dump.json + tensor files, sglang Pass{id}.pt, "
                                 ".pt / safetensors dicts) into one schema-v1 file through a mapping, without re-running "
                                 "anything (the Python kit's importer: python3 with numpy and h5py; see `dsa-check import --help`)");
  cmd->prefix_command();   // every argument goes to the importer unchanged
  cmd->set_help_flag();    // --help too: the importer's help lists its options and an example
  cmd->allow_extras();
  cmd->callback([cmd, &rc] { rc = run_import(cmd->remaining()); });
}

}  // namespace dsa::cli
