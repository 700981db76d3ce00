#include "engines/kv_cache/mla_records.hpp"

#include <cstring>

#include "engines/quant/block_quant.hpp"
#include "numerics/formats.hpp"
#include "numerics/fp8_core.hpp"

namespace dsa::engines::kv_cache {

namespace {

using L = layouts::MlaKCache;

// One tile of n bf16 values into n e4m3 codes; returns the tile's scale.
float quantize_tile(const quant::QuantParams& q, const std::uint16_t* c, std::int64_t n, std::uint8_t* codes) {
  float x[L::kTile];
  for (std::int64_t d = 0; d < n; ++d) x[d] = num::bf16_to_f32(c[d]);
  const float s = quant::quantize_block(x, n, q, codes);
  for (std::int64_t d = 0; d < n; ++d)
    if ((codes[d] & 0x7F) == 0x7F) codes[d] = 0x7F;  // NaN (x86 writes the sign of 0/0): the CUDA code
  return s;
}

}  // namespace

void store_mla_token(const quant::QuantParams& q, const std::uint16_t* c, const std::uint16_t* k_pe, std::uint8_t* rec) {
  for (std::int64_t j = 0; j < L::kTiles; ++j) {
    const float s = quantize_tile(q, c + j * L::kTile, L::kTile, rec + j * L::kTile);
    std::memcpy(rec + L::kScaleOff + 4 * j, &s, 4);
  }
  std::memcpy(rec + L::kRopeOff, k_pe, 2 * L::kRope);
}

void store_model1_token(const layouts::Model1KCache& m1, const quant::QuantParams& q, const std::uint16_t* c,
                        const std::uint16_t* k_pe, std::uint8_t* cache, std::int64_t slot) {
  using M = layouts::Model1KCache;
  std::uint8_t* tok = cache + m1.token_offset(slot);
  std::uint8_t* sc = cache + m1.scale_offset(slot);
  for (std::int64_t j = 0; j < M::kTiles; ++j) {
    const float s = quantize_tile(q, c + j * M::kTile, M::kTile, tok + j * M::kTile);
    sc[j] = fp8core::e8m0_of(s);  // the exponent field of the power-of-two scale, NaN 0xFF (shared with cuda.cu)
  }
  sc[M::kTiles] = 0;
  std::memcpy(tok + M::kNope, k_pe, 2 * M::kRope);
}

}  // namespace dsa::engines::kv_cache
