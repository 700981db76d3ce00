// mla.kcache_store on the GPU: one thread per (token, tile), the block quantizer every writer shares
// (engines/quant/quant_core.hpp; e8m0 bytes from numerics/fp8_core.hpp; --fmad=false, IEEE division) and the byte offsets
// the host computed from its layout type: identical bytes to cpu.cpp (parse() guarantees distinct slots).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cuda.hpp"
#include "engines/quant/quant_core.hpp"
#include "numerics/fp4_core.hpp"
#include "numerics/fp8_core.hpp"
#include "numerics/half_core.hpp"
#include "stages/mla/kcache_store/cuda.hpp"

namespace dsa::mla::kcache_store {

namespace {

constexpr std::int64_t kRope = 64;

__global__ void store_kernel(std::uint8_t* cache, CudaStore s) {
  const std::int64_t id = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= s.T * s.tiles) return;
  const std::int64_t t = id / s.tiles, j = id % s.tiles, co = s.code_off[t];
  if (co < 0) return;  // padded token
  const std::uint16_t* x = s.kv_c + t * s.nope + j * s.tile;
  std::uint8_t* codes = cache + co + j * s.tile;
  const float sc = quant::quantize_block_with([x](std::int64_t i) { return quant::bf16_value(x[i]); }, s.tile, s.quant,
                                              [codes](std::int64_t i, std::uint8_t c) {
                                                codes[i] = (c & 0x7F) == 0x7F ? std::uint8_t{0x7F} : c;  // NaN: the CUDA code
                                              });
  if (s.e8m0) {
    cache[s.scale_off[t] + j] = fp8core::e8m0_of(sc);
    if (j == 0) cache[s.scale_off[t] + s.tiles] = 0;  // pad byte
  } else {
    memcpy(cache + s.scale_off[t] + 4 * j, &sc, 4);
  }
  if (j == 0) memcpy(cache + s.rope_off[t], s.k_pe + t * kRope, 2 * kRope);
}

__global__ void store_records_kernel(std::uint8_t* cache, CudaRecordStore s) {
  const std::int64_t id = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (id >= s.T * s.nscales) return;
  const std::int64_t t = id / s.nscales;
  const int b = static_cast<int>(id % s.nscales);
  const std::int64_t* off = s.off + t * s.nregions;
  if (off[0] < 0) return;  // padded token
  std::int64_t codes = -1, scales = -1, ropeo = -1;
  int scale_bytes = 0;
  for (int i = 0; i < s.nregions; ++i) {
    if (s.region_kind[i] == 0) codes = off[i];
    if (s.region_kind[i] == 1) scales = off[i], scale_bytes = s.region_bytes[i];
    if (s.region_kind[i] == 2) ropeo = off[i];
  }
  const float* x = s.x + t * s.dim + static_cast<std::int64_t>(b) * s.block;
  const fp4core::E2m1Opts eo{static_cast<fp4core::Tie>(s.tie), static_cast<fp4core::ZeroSign>(s.zero), static_cast<fp4core::NanCode>(s.nan)};
  std::uint8_t sb = 0;
  if (s.codec == 0) fp4core::mxfp8_block(x, cache + codes + b * s.block, &sb, static_cast<fp4core::Mx8Rule>(s.mx8), s.byte_max);
  else if (s.codec == 1) fp4core::nvfp4_block(x, cache + codes + b * s.block / 2, &sb, static_cast<fp4core::Nv4Rule>(s.nv4), eo);
  else if (s.codec == 2) fp4core::mxfp4_block(x, cache + codes + b * s.block / 2, &sb, static_cast<fp4core::Mx4Rule>(s.mx4), eo);
  else fp4core::mxfp8_block(x, cache + codes + b * s.block, &sb, static_cast<fp4core::Mx8Rule>(s.mx8), 255, s.block);
  const int sw = s.codec == 3 ? 4 : 1;  // bytes of one scale (3 = layouts::RecCodec::fp8: fp32 2^e)
  if (s.codec == 3) {
    const float sc = fp4core::fp8_pow2_scale(x, s.block, sb);
    memcpy(cache + scales + 4 * b, &sc, 4);
  } else {
    cache[scales + (s.interleave4x8 ? 8 * (b & 3) + (b >> 2) : b)] = sb;
  }
  if (b != 0) return;
  if (!s.interleave4x8)
    for (int k = s.nscales * sw; k < scale_bytes; ++k) cache[scales + k] = 0;  // a scale row's unused bytes
  for (int i = 0; i < s.nregions; ++i)
    if (s.region_kind[i] == 3 && !s.pad_untouched)
      for (int k = 0; k < s.region_bytes[i]; ++k) cache[off[i] + k] = 0;
  if (ropeo < 0) return;
  const float* r = s.x + t * s.dim + s.nope;
  for (int d = 0; d < s.rope; ++d) {
    if (s.rope_store == 2) {
      cache[ropeo + d] = s.rope_sat ? fp4core::f32_to_e4m3_sat(r[d]) : fp8core::f32_to_e4m3(r[d]);
    } else {
      const std::uint16_t h = halfcore::f32_to_bf16(r[d]);
      cache[ropeo + 2 * d] = static_cast<std::uint8_t>(h & 0xFF);
      cache[ropeo + 2 * d + 1] = static_cast<std::uint8_t>(h >> 8);
    }
  }
}

}  // namespace

void store_records_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const CudaRecordStore& s) {
  cuda::Buffer dc(static_cast<std::size_t>(cache_bytes)), dx(static_cast<std::size_t>(s.T * s.dim * 4)),
      doff(static_cast<std::size_t>(s.T * s.nregions * 8));
  dc.upload(cache, static_cast<std::size_t>(cache_bytes));
  if (s.T > 0) {
    dx.upload(s.x, static_cast<std::size_t>(s.T * s.dim * 4));
    doff.upload(s.off, static_cast<std::size_t>(s.T * s.nregions * 8));
  }
  CudaRecordStore d = s;
  d.x = static_cast<const float*>(dx.get());
  d.off = static_cast<const std::int64_t*>(doff.get());
  const std::int64_t threads = s.T * s.nscales;
  if (threads > 0) {
    store_records_kernel<<<static_cast<unsigned>((threads + 127) / 128), 128>>>(static_cast<std::uint8_t*>(dc.get()), d);
    cuda::check_last("mla.kcache_store records kernel");
  }
  dc.download(cache, static_cast<std::size_t>(cache_bytes));
}

void store_cuda(std::uint8_t* cache, std::int64_t cache_bytes, const CudaStore& s) {
  cuda::Buffer dc(static_cast<std::size_t>(cache_bytes)), dx(static_cast<std::size_t>(s.T * s.nope * 2)),
      dp(static_cast<std::size_t>(s.T * kRope * 2)), doff(static_cast<std::size_t>(s.T * 8 * 3));
  dc.upload(cache, static_cast<std::size_t>(cache_bytes));
  dx.upload(s.kv_c, static_cast<std::size_t>(s.T * s.nope * 2));
  dp.upload(s.k_pe, static_cast<std::size_t>(s.T * kRope * 2));
  auto* off = static_cast<std::int64_t*>(doff.get());
  std::vector<std::int64_t> host(static_cast<std::size_t>(3 * s.T));  // the three offset arrays back to back: one upload
  std::copy(s.code_off, s.code_off + s.T, host.begin());
  std::copy(s.scale_off, s.scale_off + s.T, host.begin() + s.T);
  std::copy(s.rope_off, s.rope_off + s.T, host.begin() + 2 * s.T);
  if (s.T > 0) doff.upload(host.data(), host.size() * 8);
  CudaStore d = s;
  d.kv_c = static_cast<const std::uint16_t*>(dx.get());
  d.k_pe = static_cast<const std::uint16_t*>(dp.get());
  d.code_off = off;
  d.scale_off = off + s.T;
  d.rope_off = off + 2 * s.T;
  const std::int64_t threads = s.T * s.tiles;
  if (threads > 0) {
    store_kernel<<<static_cast<unsigned>((threads + 127) / 128), 128>>>(static_cast<std::uint8_t*>(dc.get()), d);
    cuda::check_last("mla.kcache_store kernel");
  }
  dc.download(cache, static_cast<std::size_t>(cache_bytes));
}

}  // namespace dsa::mla::kcache_store
