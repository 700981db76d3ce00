// DSA_CUDA_STATS=1: per-phase wall times of a CUDA reference call on stderr ("cuda <engine>: <phase> <ms> ms ..."),
// for the GPU benchmarks (scripts/gpu_bench.sh) and for users asking where a GPU check's time goes. A phase ends
// with a device synchronization only while the stats are on, so the timed phases are the device's own.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "io/env_flag.hpp"

namespace dsa::cuda {

inline bool stats_on() {
  static const bool on = io::env_flag("DSA_CUDA_STATS");
  return on;
}

// Phases of one call: mark("upload") after each phase; print() writes one line with every phase's milliseconds.
class PhaseClock {
 public:
  explicit PhaseClock(std::string engine) : engine_(std::move(engine)), t_(std::chrono::steady_clock::now()) {}
  void mark(const char* phase) {
    if (!stats_on()) return;
    const auto now = std::chrono::steady_clock::now();
    const double ms = std::chrono::duration<double, std::milli>(now - t_).count();
    t_ = now;
    for (auto& p : phases_)
      if (p.first == phase) {
        p.second += ms;
        return;
      }
    phases_.emplace_back(phase, ms);
  }
  void print(const std::string& what) const {
    if (!stats_on()) return;
    std::string line = "cuda " + engine_ + ": " + what + ":";
    double total = 0;
    for (const auto& [name, ms] : phases_) {
      char b[64];
      std::snprintf(b, sizeof b, " %s %.2f ms,", name.c_str(), ms);
      line += b;
      total += ms;
    }
    char b[48];
    std::snprintf(b, sizeof b, " in all %.2f ms", total);
    std::fprintf(stderr, "%s%s\n", line.c_str(), b);
  }

 private:
  std::string engine_;
  std::chrono::steady_clock::time_point t_;
  std::vector<std::pair<std::string, double>> phases_;
};

}  // namespace dsa::cuda
