// Layout `mla_fp8_656`: the V3.2 sparse-MLA KV cache "FP8 with scale" (spec v32 §6.3; FlashMLA README and
// tests/quant.py, vLLM `fp8_ds_mla`, sglang). Pages of page_size (64) tokens; each token is a contiguous 656-byte record:
//   bytes [0, 512)    512 e4m3fn codes of the latent c (NoPE part), dims 0..511
//   bytes [512, 528)  4 fp32 little-endian scales, tile j covers dims [128j, 128j+128)
//   bytes [528, 656)  64 bf16 little-endian k_pe values (RoPE part, stored unquantized)
// Tensor u8 [num_blocks, page_size, 1, 656]; token index in the sparse-decode `indices` = page * page_size + offset.
#pragma once
#include <cstdint>
#include <cmath>
#include <cstring>
#include <limits>
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

// Layout `model1_fp8_584`: the DeepSeek-V4 ("MODEL1") sparse-MLA KV cache (FlashMLA @9241ae3 tests/quant.py
// quantize_k_cache MODEL1_FP8Sparse, flash_mla_interface.py; vLLM's V4 main compressor store, spec v4 §9-§10). Per
// block of page_size tokens (the kernel's tensor is u8 [num_blocks, page_size, 1, 584], a view of blocks padded to a
// multiple of 576 bytes; a dump holds the 584 * page_size bytes of each block, the padding dropped):
//   bytes [t*576, t*576 + 448)        token t: 448 e4m3fn codes of the NoPE dims 0..447
//   bytes [t*576 + 448, (t+1)*576)    token t: 64 bf16 little-endian RoPE values (dims 448..511, unquantized)
//   bytes [ps*576 + t*8, +7)          token t: 7 e8m0 scales (2^(byte - 127); 0xFF NaN), tile j = dims [64j, 64j+64)
//   byte  ps*576 + t*8 + 7            pad (0)
// Token index in the sparse-decode indices = page * page_size + offset. Keys and values are all 512 dims (K = V).
struct Model1KCache {
  static constexpr const char* kName = "model1_fp8_584";
  static constexpr std::int64_t kNope = 448, kRope = 64, kTile = 64, kTiles = 7, kDim = 512;
  static constexpr std::int64_t kToken = kNope + 2 * kRope, kScaleRec = 8, kRecord = kToken + kScaleRec;  // 576, 8, 584
  std::int64_t page_size = 64;
  std::int64_t token_offset(std::int64_t slot) const { return (slot / page_size) * page_size * kRecord + (slot % page_size) * kToken; }
  std::int64_t scale_offset(std::int64_t slot) const {
    return (slot / page_size) * page_size * kRecord + page_size * kToken + (slot % page_size) * kScaleRec;
  }
  // "page 3 token 17 dim 40 (fp8 code, scale tile 0)", "page 3 token 17 rope dim 5 byte 0", "page 3 token 17 scale tile 2
  // (e8m0)", "page 3 token 17 scale pad byte".
  std::string describe(std::int64_t byte) const;
};

// One MODEL1 block (page_size * 584 bytes) rewritten in place between the per-block split above and 584-byte AoS token
// records (576 token bytes, then the token's 8 scale bytes: the layout some ports use). The selftest models that
// confusion with them: a writer emitting AoS (split_to_aos), a reader taking the split bytes as AoS (aos_to_split).
void model1_split_to_aos(std::uint8_t* block, std::int64_t page_size);
void model1_aos_to_split(std::uint8_t* block, std::int64_t page_size);

// The e8m0 value 2^(b - 127) (b = 0xFF: NaN) as float (2^-127 is a float subnormal: exact).
inline float e8m0_to_f32(std::uint8_t b) {
  if (b == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(b) - 127);
}

}  // namespace dsa::layouts
