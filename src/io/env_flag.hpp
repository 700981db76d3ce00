// An on/off switch from the environment (DSA_TIMING, DSA_CUDA_STATS, ...): on when the variable is set, non-empty and
// not "0". Plain C++17 (nvcc compiles its includers too).
#pragma once
#include <cstdlib>
#include <cstring>

namespace dsa::io {

inline bool env_flag(const char* name) {
  const char* s = std::getenv(name);
  return s && *s && std::strcmp(s, "0") != 0;
}

}  // namespace dsa::io
