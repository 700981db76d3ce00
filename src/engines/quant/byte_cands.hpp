// Cache bytes from bounded values, with their candidates (RefTensor::candidates): a kernel whose fp32 value of element
// i lies within ey[i] of the exact y[i] rounds it to bf16 and quantizes the block. The reference writes the bytes of
// the exact value's bf16 rounding; where the bound reaches across a bf16 rounding boundary (and so possibly across a
// scale step of the block), the bytes such a kernel can write instead are that byte's accepted candidates. Shared by
// the writers judged this way (v4.compressor_cache, v41.indexer_k).
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "engines/quant/quant_core.hpp"
#include "numerics/fp4_core.hpp"

namespace dsa::quant {

// The bf16 values a kernel within `e` of the exact v can round to: bf16(v) first, then bf16(v - e), bf16(v + e).
std::vector<std::uint16_t> bf16_cands(double v, double e);

// RefTensor::candidates: byte offset -> the other accepted bytes.
using ByteCandMap = std::map<std::int64_t, std::vector<std::uint64_t>>;

// Bytes one reference thread writes: offset -> (reference byte, other accepted bytes).
struct ByteOut {
  std::vector<std::pair<std::int64_t, std::uint8_t>> ref;
  std::vector<std::pair<std::int64_t, std::vector<std::uint8_t>>> alt;
  void put(std::int64_t off, std::uint8_t v, const std::vector<std::uint8_t>& all);
  // A little-endian fp32 at off: the reference value and the other accepted values, byte by byte.
  void put_f32(std::int64_t off, float v, const std::vector<float>& all);
  // Into one output tensor's bytes (offsets [lo, hi) of this writer's numbering; bytes[0] is offset lo): the
  // reference bytes written, the other accepted ones appended to cands (keyed from 0). Threads' results applied in a
  // fixed order give the same tensor for any thread count.
  void apply(std::uint8_t* bytes, ByteCandMap& cands, std::int64_t lo = 0, std::int64_t hi = INT64_MAX) const;
};

// One fp8 block of n values under `rule` (one scale): the e4m3 code of element i at code_off(i) (a NaN code written
// 0x7F, the CUDA cast's), the scale through put_scale(reference scale, every scale the block's amax can give).
struct Fp8Cands {
  std::vector<std::vector<std::uint8_t>> codes;  // [n]: the reference code first, then the other candidates
  float scale = 0;                               // the reference scale
  std::vector<float> scales;                     // every candidate scale (the reference first)
};
Fp8Cands fp8_block_cands(const double* y, const double* ey, std::int64_t n, const ScaleRule& rule);

// One MXFP4 block of 32 values (fp4core::mxfp4_block's rule and e2m1 options): 16 code bytes (dims 2j, 2j+1 in the
// low, high nibble of byte j) at codes_off + j, the ue8m0 scale byte at scale_off. A byte's candidates pair the two
// nibbles' candidates under one scale: every scale the amax can give, both elements' bf16 candidates.
void mxfp4_block_cands(const double* y, const double* ey, fp4core::Mx4Rule rule, const fp4core::E2m1Opts& o, ByteOut& out,
                       std::int64_t codes_off, std::int64_t scale_off);

}  // namespace dsa::quant
