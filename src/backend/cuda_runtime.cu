// The CUDA backend's runtime pieces: device detection, checked device buffers (src/backend/cuda.hpp).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "backend/cuda.hpp"

namespace dsa::cuda {

namespace {
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
}
}  // namespace

std::string device_problem() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return std::string("no CUDA device: cudaGetDeviceCount: ") + cudaGetErrorString(e);
  if (n == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

Buffer::Buffer(std::size_t bytes) { ok(cudaMalloc(&p_, bytes ? bytes : 1), "cudaMalloc"); }
Buffer::~Buffer() { cudaFree(p_); }
void Buffer::upload(const void* src, std::size_t bytes) { ok(cudaMemcpy(p_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"); }
void Buffer::download(void* dst, std::size_t bytes) const { ok(cudaMemcpy(dst, p_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"); }
void check_last(const char* what) {
  ok(cudaGetLastError(), what);
  ok(cudaDeviceSynchronize(), what);
}

}  // namespace dsa::cuda
