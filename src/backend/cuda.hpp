// The CUDA backend's host side, usable from every translation unit (plain C++17, no CUDA headers). Built only when
// CMake found nvcc (DSA_CUDA_BACKEND defined on dsacore); otherwise `--backend cuda` reports that this build has none.
#pragma once
#include <cstddef>
#include <string>

namespace dsa::cuda {

// "" when a CUDA device can run the backend's kernels, else why not ("no CUDA device: ...", "this build has no CUDA
// backend: ..."). The message is the whole answer of `--backend cuda` on this machine (exit 2).
std::string device_problem();

// Starts creating the CUDA context on a background thread (the first CUDA call of a process pays ~0.1-0.3 s for it),
// so that it overlaps the file reads of a check; the first kernel call waits for it if it is not done. Joined at exit.
// A no-op in a build without the backend.
void warm_up();

#ifdef DSA_CUDA_BACKEND
// Device buffers for one reference call: RAII, every CUDA call checked (std::runtime_error naming the call).
// DSA_CUDA_POISON=<hex byte> (e.g. ff, 5a) fills every new buffer with that byte, so an output element a kernel
// forgets to write shows up as a difference in `backend-diff` instead of cudaMalloc's leftovers (scripts/gpu_check.sh
// runs the committed goldens under two patterns); unset, buffers are not filled.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes);
  void fill(unsigned char byte);  // cudaMemset of the whole buffer
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* get() const { return p_; }
  void upload(const void* src, std::size_t bytes);
  void download(void* dst, std::size_t bytes) const;

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 1;
};
// Throws std::runtime_error("CUDA <what>: <error string>") after a kernel launch or a sync that failed.
void check_last(const char* what);
#endif

}  // namespace dsa::cuda
