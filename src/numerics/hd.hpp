// DSA_HD: functions compiled for the host and, under nvcc, for the device too (the scalar cores that cpu.cpp and
// cuda.cu share: architecture.md, determinism contract way 3). Headers that use it stay plain C++17 without libm,
// std::numeric_limits or exceptions, so nvcc compiles them for the device unchanged.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define DSA_HD __host__ __device__
#else
#define DSA_HD
#endif

namespace dsa::hd {

// Bit casts (memcpy: no aliasing questions on either compiler).
DSA_HD inline std::uint32_t bits32(float x) {
  std::uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
DSA_HD inline float from_bits32(std::uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
DSA_HD inline std::uint64_t bits64(double x) {
  std::uint64_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}
DSA_HD inline double from_bits64(std::uint64_t u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace dsa::hd
