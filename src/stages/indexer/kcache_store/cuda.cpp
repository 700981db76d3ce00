// indexer.kcache_store, the CUDA implementation's host side: the slots and the cache to the store kernel (cuda.cu),
// then the same packaging as the CPU reference (expected_of). Same bytes as cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <memory>
#include <vector>

#include "stages/indexer/kcache_store/cuda.hpp"
#include "stages/indexer/kcache_store/stage.hpp"

namespace dsa::indexer::kcache_store {

Expected cuda(const Case& c, const Params& p, const RefOptions&) {
  const Tensor& k_fp8 = c.input("k_fp8");
  const Tensor& slots = c.input("slot_mapping");
  const std::int64_t T = k_fp8.dim(0), D = k_fp8.dim(1);
  Tensor cache = c.input("kv_cache_in").clone();
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(cache.dim(0) * p.layout.page_size), -1);
  std::vector<std::int64_t> sl(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    sl[static_cast<std::size_t>(t)] = slots.int_at(t);
    if (sl[static_cast<std::size_t>(t)] >= 0) (*writer)[static_cast<std::size_t>(sl[static_cast<std::size_t>(t)])] = t;
  }
  store_cuda(cache.data<std::uint8_t>(), static_cast<std::int64_t>(cache.nbytes()), k_fp8.data<std::uint8_t>(), c.input("k_scale").data<float>(),
             sl.data(), T, D, p.layout.page_size, p.layout.order == layouts::KCacheOrder::preshuffle16);
  return expected_of(std::move(cache), p.layout, std::move(writer));
}

}  // namespace dsa::indexer::kcache_store
#endif
