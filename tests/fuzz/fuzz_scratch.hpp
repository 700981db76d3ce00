// The scratch file of a fuzz target: one per fuzzing process (pid in the name), on tmpfs when there is one
// (DSA_FUZZ_TMP overrides the directory), removed at exit. Shared by tests/fuzz/fuzz_load.cpp and fuzz_report.cpp.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dsa::fuzz {

// The path "<dir>/dsa_fuzz_<tag>_<pid><ext>", made once per process, removed when the process exits.
inline const std::string& scratch_path(const char* tag, const char* ext) {
  struct File {
    std::string path;
    ~File() { std::remove(path.c_str()); }
  };
  static const File f{[&] {
    const char* dir = std::getenv("DSA_FUZZ_TMP");
    std::string d = dir ? dir : (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    return d + "/dsa_fuzz_" + tag + std::to_string(::getpid()) + ext;
  }()};
  return f.path;
}

}  // namespace dsa::fuzz
