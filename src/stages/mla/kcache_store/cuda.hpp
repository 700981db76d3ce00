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

// The kv record layouts (layouts/kv_records.hpp): one thread per (token, scale block) quantizes with numerics/fp4_core.hpp,
// the first block's thread also stores the token's RoPE and pad bytes. Offsets per token and region from the host.
struct CudaRecordStore {
  std::int64_t T = 0;
  int dim = 0, nope = 0, rope = 0, block = 0, nscales = 0, nregions = 0;
  int codec = 0;       // layouts::RecCodec
  int rope_store = 0;  // layouts::RopeStore
  bool interleave4x8 = false, pad_untouched = false;
  int region_kind[5] = {}, region_bytes[5] = {};
  std::uint8_t mx8 = 0, nv4 = 0, mx4 = 0, tie = 0, zero = 0, nan = 0;
  int byte_max = 255;
  bool rope_sat = false;
  const float* x = nullptr;          // [T, dim]
  const std::int64_t* off = nullptr;  // [T, nregions] byte offsets (-1: padded token)
};

void store_records_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const CudaRecordStore& s);

}  // namespace dsa::mla::kcache_store
