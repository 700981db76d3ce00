// DSA_TIMING=1: one stderr line per phase of a check (file read, each case's reference and comparison) with its
// wall time, for the end-to-end benchmarks (bench/gpu_e2e_paged.py) and for users asking where a long check goes.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "io/env_flag.hpp"

namespace dsa::pipeline {

inline bool timing_on() {
  static const bool on = io::env_flag("DSA_TIMING");
  return on;
}

// Prints "timing: WHAT: S s" when timing_on(), S since t0.
inline void timing_line(const std::string& what, std::chrono::steady_clock::time_point t0) {
  if (!timing_on()) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "timing: %s: %.3f s\n", what.c_str(), s);
}

}  // namespace dsa::pipeline
