// engines/topk's segmented key sort on the GPU (topk_keys.cuh): one CUB DeviceSegmentedSort, its scratch allocated
// per call.
#include <cub/device/device_segmented_sort.cuh>

#include <stdexcept>
#include <string>

#include "backend/cuda.hpp"
#include "engines/topk/topk_keys.cuh"

namespace dsa::engines::topk {

void sort_segments(const std::uint64_t* in, std::uint64_t* out, std::int64_t n, std::int64_t segs, const std::int64_t* beg,
                   const std::int64_t* end) {
  auto ok = [](cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("CUDA ") + what + ": " + cudaGetErrorString(e));
  };
  std::size_t temp = 0;
  auto sort = [&](void* t) { return cub::DeviceSegmentedSort::SortKeys(t, temp, in, out, n, segs, beg, end); };
  ok(sort(nullptr), "cub::DeviceSegmentedSort::SortKeys (temp size)");
  cuda::Buffer dtemp(temp);
  ok(sort(dtemp.get()), "cub::DeviceSegmentedSort::SortKeys");
  cuda::check_last("cub::DeviceSegmentedSort::SortKeys");
}

}  // namespace dsa::engines::topk
