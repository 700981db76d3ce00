// indexer.kcache_store's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a
// CUDA failure. cache [bytes] is the cache before the store on entry and after it on return.
#pragma once
#include <cstdint>

namespace dsa::indexer::kcache_store {

void store_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const std::uint8_t* codes, const float* scales, const std::int64_t* slots,
                std::int64_t T, std::int64_t D, std::int64_t page_size, bool preshuffle16);

}  // namespace dsa::indexer::kcache_store
