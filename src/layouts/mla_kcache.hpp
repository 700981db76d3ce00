// Layout `mla_fp8_656`: the V3.2 sparse-MLA KV cache "FP8 with scale" (spec v32 §6.3; FlashMLA README and
// tests/quant.py, vLLM `fp8_ds_mla`, sglang). Pages of page_size (64) tokens; each token is a contiguous 656-byte record:
//   bytes [0, 512)    512 e4m3fn codes of the latent c (NoPE part), dims 0..511
//   bytes [512, 528)  4 fp32 little-endian scales, tile j covers dims [128j, 128j+128)
//   bytes [528, 656)  64 bf16 little-endian k_pe values (RoPE part, stored unquantized)
// Tensor u8 [num_blocks, page_size, 1, 656]; token index in the sparse-decode `indices` = page * page_size + offset.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "tensor/tensor.hpp"

namespace dsa::layouts {

struct MlaKCache {
  static constexpr const char* kName = "mla_fp8_656";
  static constexpr std::int64_t kNope = 512, kRope = 64, kTile = 128, kTiles = 4;
  static constexpr std::int64_t kScaleOff = kNope, kRopeOff = kNope + 4 * kTiles, kRecord = kRopeOff + 2 * kRope;  // 656
  std::int64_t page_size = 64;
  std::int64_t token_offset(std::int64_t page, std::int64_t t) const { return (page * page_size + t) * kRecord; }
  // "page 3 token 17 dim 40 (fp8 code)", "page 3 token 17 scale tile 2 byte 1", "page 3 token 17 rope dim 5 byte 0".
  std::string describe(std::int64_t byte) const;
};

// Read access to one token record.
struct MlaToken {
  const std::uint8_t* rec;
  std::uint8_t code(std::int64_t d) const { return rec[d]; }
  float scale(std::int64_t tile) const {
    float s;
    std::memcpy(&s, rec + MlaKCache::kScaleOff + 4 * tile, sizeof s);  // little-endian host assumed (x86-64, aarch64)
    return s;
  }
  std::uint16_t rope_bits(std::int64_t r) const {
    std::uint16_t b;
    std::memcpy(&b, rec + MlaKCache::kRopeOff + 2 * r, sizeof b);
    return b;
  }
};

}  // namespace dsa::layouts
