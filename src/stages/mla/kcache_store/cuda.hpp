// mla.kcache_store's CUDA entry point (cuda.cu), callable from C++20 code: plain arguments, std::runtime_error on a
// CUDA failure. The layout is the host's (layouts/mla_kcache.hpp): per token, the byte offsets of its codes, its
// scales and its RoPE bytes in the cache (-1: padded token), computed by the caller; the device only quantizes and
// moves bytes. cache [bytes] is the cache before the store on entry and after it on return.
#pragma once
#include <cstdint>

#include "engines/quant/quant_core.hpp"

namespace dsa::mla::kcache_store {

struct CudaStore {
  std::int64_t T = 0, nope = 0, tile = 0, tiles = 0;  // tokens, NoPE dims, tile size, tiles per token
  bool e8m0 = false;                                   // scales as e8m0 bytes + a zero pad byte (MODEL1), else raw fp32
  quant::QuantParams quant;                            // the producer's scale rule (the shared block quantizer)
  const std::uint16_t* kv_c = nullptr;  // [T, nope] bf16 bits
  const std::uint16_t* k_pe = nullptr;  // [T, 64] bf16 bits
  const std::int64_t *code_off = nullptr, *scale_off = nullptr, *rope_off = nullptr;  // [T]
};

void store_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const CudaStore& s);

}  // namespace dsa::mla::kcache_store
