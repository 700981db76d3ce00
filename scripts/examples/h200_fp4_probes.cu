// What the GPU's own instructions give where the FP4 record writers' sources leave it open
// (docs/research_fp4_records.md, "to pin on a GPU"): rcp.approx.ftz.f32 of 6 and of every positive finite e4m3
// value (the lil432 rule takes them as the correctly rounded reciprocals), and cvt.rn.satfinite.e4m3x2.f32 of NaN,
// +-inf and values past 448 (the saturating casts of vllm352 / flashinfer384 / lil432).
//   nvcc -O2 -arch=sm_90 -o probes scripts/examples/h200_fp4_probes.cu && ./probes
// Prints one line per finding; exit 0.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

__global__ void rcp_kernel(const float* x, float* approx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x[i]));
  approx[i] = r;
}

__global__ void cvt_kernel(const float* x, unsigned short* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned short r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(x[i]), "f"(0.0f));
  out[i] = r;
}

static float e4m3(unsigned c) {  // e4m3fn decode, c in 1..0x7E
  unsigned e = (c >> 3) & 0xF, m = c & 7;
  return e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, int(e) - 7);
}

static unsigned bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}

int main() {
  const int n = 1 + 126;
  float hx[n], hr[n];
  hx[0] = 6.0f;
  for (int c = 1; c <= 126; ++c) hx[c] = e4m3(unsigned(c));
  float *dx, *dr;
  cudaMalloc(&dx, sizeof hx);
  cudaMalloc(&dr, sizeof hr);
  cudaMemcpy(dx, hx, sizeof hx, cudaMemcpyHostToDevice);
  rcp_kernel<<<1, 128>>>(dx, dr, n);
  cudaMemcpy(hr, dr, sizeof hr, cudaMemcpyDeviceToHost);
  int differ = 0;
  for (int i = 0; i < n; ++i) {
    const float ieee = 1.0f / hx[i];
    if (bits(ieee) != bits(hr[i])) {
      ++differ;
      std::printf("rcp.approx.ftz(%a) = %a (0x%08x), IEEE 1/x = %a (0x%08x)\n", hx[i], hr[i], bits(hr[i]), ieee, bits(ieee));
    }
  }
  std::printf("rcp.approx.ftz.f32: %d of %d inputs (6 and the 126 positive finite e4m3 values) differ from the IEEE reciprocal\n", differ, n);
  const float probes[] = {NAN, -NAN, INFINITY, -INFINITY, 448.0f, 449.0f, 464.0f, 464.001f, 480.0f, 1e30f, -1e30f, -0.0f, 0.0009765625f, 0.0009765626f};
  const int m = sizeof probes / sizeof probes[0];
  float* dp;
  unsigned short *dc, hc[m];
  cudaMalloc(&dp, sizeof probes);
  cudaMalloc(&dc, sizeof hc);
  cudaMemcpy(dp, probes, sizeof probes, cudaMemcpyHostToDevice);
  cvt_kernel<<<1, 32>>>(dp, dc, m);
  cudaMemcpy(hc, dc, sizeof hc, cudaMemcpyDeviceToHost);
  for (int i = 0; i < m; ++i) std::printf("cvt.rn.satfinite.e4m3x2(%a) = 0x%02x\n", probes[i], unsigned(hc[i] >> 8));
  const cudaError_t e = cudaGetLastError();
  std::printf("cuda: %s\n", cudaGetErrorString(e));
  return 0;
}
