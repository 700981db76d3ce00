// `--backend cuda` in a build without the CUDA backend (CMake found no nvcc, or -DDSA_WITH_CUDA=OFF).
#include "backend/cuda.hpp"

namespace dsa::cuda {

#ifndef DSA_CUDA_BACKEND
std::string device_problem() {
  return "this build has no CUDA backend (CMake found no CUDA compiler, or -DDSA_WITH_CUDA=OFF): rebuild with nvcc on PATH";
}
void warm_up() {}
#endif

}  // namespace dsa::cuda
