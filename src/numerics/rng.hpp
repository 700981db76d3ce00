// Deterministic, libm-free random numbers for generators and self-tests: the same seed gives the same bits on
// every machine, compiler and thread count (counter-based: value i of stream s depends only on (seed, s, i)).
#pragma once
#include <cstdint>

namespace dsa {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed, std::uint64_t stream = 0) : key_(splitmix64(seed ^ splitmix64(stream + 0x51ED27ull))) {}
  // Independent sub-stream (e.g. one per row, so rows can be generated in parallel deterministically).
  Rng fork(std::uint64_t stream) const { return Rng(key_, stream + 1); }
  std::uint64_t next_u64() { return splitmix64(key_ + 0x632BE59BD9B4E019ull * (++ctr_)); }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [lo, hi] (inclusive); hi >= lo.
  std::int64_t randint(std::int64_t lo, std::int64_t hi) {
    const std::uint64_t span = static_cast<std::uint64_t>(hi - lo) + 1u;
    return span == 0 ? static_cast<std::int64_t>(next_u64()) : lo + static_cast<std::int64_t>(next_u64() % span);
  }
  // Approximately standard normal (Irwin-Hall sum of 12 uniforms, minus 6): bounded in [-6, 6], mean 0,
  // variance 1. Uses only + and -, so it is bit-identical everywhere (no libm).
  double normal() {
    double s = 0.0;
    for (int i = 0; i < 12; ++i) s += uniform();
    return s - 6.0;
  }

 private:
  std::uint64_t key_;
  std::uint64_t ctr_ = 0;
};

}  // namespace dsa
