// The MLA KV-cache record writers (layouts/mla_kcache.hpp) on the CPU: one token's [c | k_pe] quantized by the shared
// block quantizer (engines/quant) into its record. mla.kcache_store's reference writes with them, and the sparse MLA
// decode generators build their caches with them; the CUDA writer (mla.kcache_store's cuda.cu) runs the same
// quantizer on the device.
#pragma once
#include <cstdint>

#include "engines/quant/quant_core.hpp"
#include "layouts/mla_kcache.hpp"

namespace dsa::engines::kv_cache {

// V3.2 `mla_fp8_656`: c (512 bf16 bits) and k_pe (64 bf16 bits) into the 656-byte record `rec`: 4 tiles of 128 e4m3
// codes (a NaN code written as 0x7F, the CUDA cast's), their fp32 scales, k_pe's raw bits.
void store_mla_token(const quant::QuantParams& q, const std::uint16_t* c, const std::uint16_t* k_pe, std::uint8_t* rec);
// MODEL1 `model1_fp8_584`: c (448 bf16 bits) and k_pe (64) into slot `slot` of the cache bytes `cache` (layout m1):
// 7 tiles of 64 codes, their e8m0 scale bytes and a zero pad byte in the block's scale records.
void store_model1_token(const layouts::Model1KCache& m1, const quant::QuantParams& q, const std::uint16_t* c,
                        const std::uint16_t* k_pe, std::uint8_t* cache, std::int64_t slot);

}  // namespace dsa::engines::kv_cache
