// The CUDA backend's runtime pieces: device detection, checked device buffers (src/backend/cuda.hpp).
#include <cuda_runtime.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

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

void warm_up() {
  static std::thread t([] { cudaFree(nullptr); });  // creates the primary context; the runtime serializes its users
  static struct Join {
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join;
  (void)join;
}

namespace {
// DSA_CUDA_POISON: -1 when unset, else the byte (a bad value is an error naming what is expected).
int poison_byte() {
  static const int b = [] {
    const char* e = std::getenv("DSA_CUDA_POISON");
    if (!e || !*e) return -1;
    const std::size_t n = std::strlen(e);
    if (n > 2 || !std::isxdigit(static_cast<unsigned char>(e[0])) || (n == 2 && !std::isxdigit(static_cast<unsigned char>(e[1]))))
      throw std::runtime_error(std::string("DSA_CUDA_POISON: expected one byte in hex (00..ff), found '") + e + "'");
    return static_cast<int>(std::strtoul(e, nullptr, 16));
  }();
  return b;
}
}  // namespace

Buffer::Buffer(std::size_t bytes) : bytes_(bytes ? bytes : 1) {
  const int poison = poison_byte();
  ok(cudaMalloc(&p_, bytes_), "cudaMalloc");
  if (poison >= 0) {
    const cudaError_t e = cudaMemset(p_, poison, bytes_);
    if (e != cudaSuccess) {
      cudaFree(p_);
      ok(e, "cudaMemset (DSA_CUDA_POISON)");
    }
  }
}
void Buffer::fill(unsigned char byte) { ok(cudaMemset(p_, byte, bytes_), "cudaMemset"); }
Buffer::~Buffer() { cudaFree(p_); }
void Buffer::upload(const void* src, std::size_t bytes) { ok(cudaMemcpy(p_, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D"); }
void Buffer::download(void* dst, std::size_t bytes) const { ok(cudaMemcpy(dst, p_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H"); }
void check_last(const char* what) {
  ok(cudaGetLastError(), what);
  ok(cudaDeviceSynchronize(), what);
}

}  // namespace dsa::cuda
