// DSA_HD: functions compiled for the host and, under nvcc, for the device too (the scalar cores that cpu.cpp and
// cuda.cu share: architecture.md, determinism contract way 3). Headers that use it stay plain C++17 without libm,
// std::numeric_limits or exceptions, so nvcc compiles them for the device unchanged.
#pragma once

#if defined(__CUDACC__)
#define DSA_HD __host__ __device__
#else
#define DSA_HD
#endif
