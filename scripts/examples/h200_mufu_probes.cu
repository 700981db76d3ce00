// The two MUFU pieces the flashmla-sm90 emulation still takes on trust (docs/research_flashmla_sm90.md, "Still to
// do"): lg2.approx.ftz.f32 below 1 and ex2.approx.ftz.f32 of positive arguments, measured over every fp32 input.
//   nvcc -O2 -arch=sm_90 -o mufu scripts/examples/h200_mufu_probes.cu && ./mufu OUT_DIR
// Prints the mismatch counts of each hypothesis per binade and writes OUT_DIR/lg2_half_1.d32 (the raw lg2 bits over
// [1/2, 1)) and OUT_DIR/ex2_pos_0_1.d32 (ex2(j 2^-23), j < 2^23), int32 differences of consecutive values: add them
// to the blob with scripts/flashmla_mufu_tables.py add NAME FILE. Written 2026-12-05; not yet run (no device lent).
#include <cstdio>
#include <cstdint>
#include <cmath>
#include <vector>
#include <cuda_runtime.h>
__device__ __forceinline__ float lg2(float x) { float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float ex2(float x) { float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__global__ void tables(int32_t* K, uint32_t* E, uint32_t* L) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < (1u << 23); i += gridDim.x * blockDim.x) {
    const float x = __uint_as_float((128u << 23) | i);  // [2, 4)
    K[i] = (int32_t)llrint(((double)lg2(x) - 1.0) * 8388608.0);
    E[i] = __float_as_uint(ex2((float)i * 0x1p-23f));
    L[i] = __float_as_uint(lg2(__uint_as_float((126u << 23) | i)));  // [1/2, 1)
  }
}
__device__ float round_to(double v, int mode) {  // v to fp32: 0 toward zero, 1 toward -inf, 2 nearest
  const float n = (float)v;
  if (mode == 2 || (double)n == v) return n;
  const float lo = (double)n < v ? n : nextafterf(n, -INFINITY);
  const float hi = (double)n > v ? n : nextafterf(n, INFINITY);
  if (mode == 1) return lo;
  return v > 0 ? lo : hi;
}
__global__ void lg2_check(const int32_t* K, unsigned long long* cnt) {
  for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < (127ull << 23); u += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t bits = (uint32_t)u + (1u << 23);  // [2^-126, 1)
    const int e = (int)(bits >> 23) - 127;
    const uint32_t i = bits & 0x7FFFFF;
    const float y = lg2(__uint_as_float(bits));
    const double v = e + (double)K[i] * 0x1p-23;
    const int b = e + 130;
    atomicAdd(&cnt[4 * b], 1ull);
    for (int m = 0; m < 3; ++m)
      if (round_to(v, m) != y) atomicAdd(&cnt[4 * b + 1 + m], 1ull);
  }
}
__global__ void ex2_check(const uint32_t* E, unsigned long long* cnt) {
  for (uint64_t u = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; u < 0x43000000ull - 0x00800000ull; u += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t bits = (uint32_t)u + 0x00800000u;  // [2^-126, 128)
    const float x = __uint_as_float(bits);
    const int e = (int)(bits >> 23) - 127;
    const float y = ex2(x);
    const double xd = x, i = floor(xd), f = (xd - i) * 8388608.0;
    const double q[3] = {trunc(f), rint(f), ceil(f)};
    const int b = e + 130;
    atomicAdd(&cnt[4 * b], 1ull);
    for (int m = 0; m < 3; ++m) {
      const double j = q[m];
      const float z = j >= 8388608.0 ? ldexpf(1.0f, (int)i + 1) : ldexpf(__uint_as_float(E[(uint32_t)j]), (int)i);
      if (z != y) atomicAdd(&cnt[4 * b + 1 + m], 1ull);
    }
  }
}
__global__ void e_vs_t(const uint32_t* E, unsigned long long* cnt) {
  for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < (1u << 23); j += gridDim.x * blockDim.x) {
    const float t = 2.0f * ex2(-(float)((1u << 23) - j) * 0x1p-23f);
    if (__float_as_uint(t) != E[j]) atomicAdd(cnt, 1ull);
  }
}
int main(int argc, char** argv) {
  const char* out = argv[1];
  int32_t* K; uint32_t *E, *L; unsigned long long *c1, *c2, *c3;
  cudaMalloc(&K, 4 << 23); cudaMalloc(&E, 4 << 23); cudaMalloc(&L, 4 << 23);
  cudaMalloc(&c1, 8 * 4 * 200); cudaMalloc(&c2, 8 * 4 * 200); cudaMalloc(&c3, 8);
  cudaMemset(c1, 0, 8 * 4 * 200); cudaMemset(c2, 0, 8 * 4 * 200); cudaMemset(c3, 0, 8);
  tables<<<1024, 256>>>(K, E, L);
  lg2_check<<<8192, 256>>>(K, c1);
  ex2_check<<<8192, 256>>>(E, c2);
  e_vs_t<<<1024, 256>>>(E, c3);
  cudaDeviceSynchronize();
  printf("cuda %s\n", cudaGetErrorString(cudaGetLastError()));
  std::vector<unsigned long long> h1(800), h2(800), h3(1);
  cudaMemcpy(h1.data(), c1, 8 * 800, cudaMemcpyDeviceToHost);
  cudaMemcpy(h2.data(), c2, 8 * 800, cudaMemcpyDeviceToHost);
  cudaMemcpy(h3.data(), c3, 8, cudaMemcpyDeviceToHost);
  for (int b = 0; b < 200; ++b)
    if (h1[4 * b]) printf("lg2 x in [2^%d, 2^%d): n %llu  H1(toward 0) %llu  H2(toward -inf) %llu  H3(nearest) %llu\n", b - 130, b - 129, h1[4 * b], h1[4 * b + 1], h1[4 * b + 2], h1[4 * b + 3]);
  for (int b = 0; b < 200; ++b)
    if (h2[4 * b]) printf("ex2 x in [2^%d, 2^%d): n %llu  C1(trunc) %llu  C2(nearest) %llu  C3(ceil) %llu\n", b - 130, b - 129, h2[4 * b], h2[4 * b + 1], h2[4 * b + 2], h2[4 * b + 3]);
  printf("E[j] != 2 T[2^23 - j]: %llu of 8388608\n", h3[0]);
  std::vector<uint32_t> hE(1 << 23), hL(1 << 23);
  cudaMemcpy(hE.data(), E, 4 << 23, cudaMemcpyDeviceToHost);
  cudaMemcpy(hL.data(), L, 4 << 23, cudaMemcpyDeviceToHost);
  auto dump = [&](const std::vector<uint32_t>& v, const char* name) {
    std::vector<int32_t> d(v.size());
    d[0] = (int32_t)v[0];
    for (size_t i = 1; i < v.size(); ++i) d[i] = (int32_t)(v[i] - v[i - 1]);
    char p[512]; snprintf(p, sizeof p, "%s/%s", out, name);
    FILE* f = fopen(p, "wb"); fwrite(d.data(), 4, d.size(), f); fclose(f);
  };
  dump(hE, "ex2_pos_0_1.d32");
  dump(hL, "lg2_half_1.d32");
  printf("done\n");
}
