// indexer.kcache_store on the GPU: one thread per (token, 16-byte group of codes) plus its scale, offsets from
// layouts/indexer_kcache_core.hpp (the definition the CPU layout type uses). A data move: identical bytes to cpu.cpp
// (parse() guarantees distinct slots, so the stores never overlap).
#include <cstdint>
#include <cstring>

#include "backend/cuda.hpp"
#include "layouts/indexer_kcache_core.hpp"
#include "stages/indexer/kcache_store/cuda.hpp"

namespace dsa::indexer::kcache_store {

namespace {

__global__ void store_kernel(std::uint8_t* cache, const std::uint8_t* codes, const float* scales, const std::int64_t* slots,
                             std::int64_t T, std::int64_t D, std::int64_t ps, bool pre) {
  const std::int64_t groups = D / layouts::kcache_core::kTile;
  const std::int64_t id = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= T * groups) return;
  const std::int64_t t = id / groups, g = id % groups, s = slots[t];
  if (s < 0) return;  // padded token
  const std::int64_t page = s / ps, slot = s % ps, d0 = g * layouts::kcache_core::kTile;
  for (std::int64_t d = d0; d < d0 + layouts::kcache_core::kTile; ++d)
    cache[layouts::kcache_core::value_offset(page, slot, d, ps, D, pre)] = codes[t * D + d];
  if (g == 0) memcpy(cache + layouts::kcache_core::scale_offset(page, slot, ps, D), scales + t, 4);
}

}  // namespace

void store_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const std::uint8_t* codes, const float* scales, const std::int64_t* slots,
                std::int64_t T, std::int64_t D, std::int64_t page_size, bool preshuffle16) {
  cuda::Buffer dc(static_cast<std::size_t>(cache_bytes)), dk(static_cast<std::size_t>(T * D)), ds(static_cast<std::size_t>(T * 4)),
      dsl(static_cast<std::size_t>(T * 8));
  dc.upload(cache, static_cast<std::size_t>(cache_bytes));
  dk.upload(codes, static_cast<std::size_t>(T * D));
  ds.upload(scales, static_cast<std::size_t>(T * 4));
  dsl.upload(slots, static_cast<std::size_t>(T * 8));
  const std::int64_t threads = T * (D / layouts::kcache_core::kTile);
  if (threads > 0) {
    store_kernel<<<static_cast<unsigned>((threads + 127) / 128), 128>>>(static_cast<std::uint8_t*>(dc.get()), static_cast<const std::uint8_t*>(dk.get()),
                                                                        static_cast<const float*>(ds.get()), static_cast<const std::int64_t*>(dsl.get()),
                                                                        T, D, page_size, preshuffle16);
    cuda::check_last("indexer.kcache_store kernel");
  }
  dc.download(cache, static_cast<std::size_t>(cache_bytes));
}

}  // namespace dsa::indexer::kcache_store
