// mla.kcache_store, the CUDA implementation's host side: the reference's frame (cpu_frame, cpu.cpp), each token's
// byte offsets from the host layout types, then the quantization and the store on the GPU (cuda.cu). Same bytes as
// cpu.cpp (backend-diff).
#ifdef DSA_CUDA_BACKEND
#include <vector>

#include "stages/mla/kcache_store/cuda.hpp"
#include "stages/mla/kcache_store/stage.hpp"

namespace dsa::mla::kcache_store {

using L = layouts::MlaKCache;

// The CUDA reference: the per-token byte offsets from the host layout types, the quantization on the device.
Expected cuda(const Case& c, const Params& p, const RefOptions& opt) {
  using M = layouts::Model1KCache;
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& slots = c.input("slot_mapping");
  const std::int64_t T = kv_c.dim(0);
  Expected e = cpu_frame(c, p, opt);  // kv_cache_in copied, the describe of the written slots
  Tensor& cache = e.tensors.front().value;
  if (p.record) {
    const layouts::RecordFormat& f = *p.rp.rec.f;
    const std::vector<float> x = record_values(c, p);
    std::vector<std::int64_t> off(static_cast<std::size_t>(T * f.nregions));
    for (std::int64_t t = 0; t < T; ++t)
      for (int i = 0; i < f.nregions; ++i) {
        const std::int64_t s = slots.int_at(t);
        off[static_cast<std::size_t>(t * f.nregions + i)] = s < 0 ? -1 : p.rp.rec.region_offset(s, i);
      }
    CudaRecordStore st;
    st.T = T;
    st.dim = f.dim();
    st.nope = f.nope;
    st.rope = f.rope_store == layouts::RopeStore::quantized ? 0 : f.rope;
    st.block = f.block();
    st.nscales = f.nscales();
    st.nregions = f.nregions;
    st.codec = static_cast<int>(f.codec);
    st.rope_store = static_cast<int>(f.rope_store);
    st.interleave4x8 = f.scale_order == layouts::ScaleOrder::interleave4x8;
    st.pad_untouched = f.pad_untouched;
    for (int i = 0; i < f.nregions; ++i) {
      st.region_kind[i] = static_cast<int>(f.regions[static_cast<std::size_t>(i)].kind);
      st.region_bytes[i] = f.regions[static_cast<std::size_t>(i)].bytes;
    }
    const layouts::RecordQuant& q = p.rp.quant;
    st.mx8 = static_cast<std::uint8_t>(q.mx8);
    st.nv4 = static_cast<std::uint8_t>(q.nv4);
    st.mx4 = static_cast<std::uint8_t>(q.mx4);
    st.tie = static_cast<std::uint8_t>(q.e2m1.tie);
    st.zero = static_cast<std::uint8_t>(q.e2m1.zero);
    st.nan = static_cast<std::uint8_t>(q.e2m1.nan);
    st.byte_max = q.byte_max;
    st.rope_sat = q.rope_sat;
    st.x = x.data();
    st.off = off.data();
    store_records_cuda(cache.data<std::uint8_t>(), static_cast<std::int64_t>(cache.nbytes()), st);
    return e;
  }
  std::vector<std::int64_t> code(static_cast<std::size_t>(T)), scale(static_cast<std::size_t>(T)), rope(static_cast<std::size_t>(T));
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t s = slots.int_at(t);
    const auto k = static_cast<std::size_t>(t);
    if (s < 0) {
      code[k] = scale[k] = rope[k] = -1;
    } else if (p.model1) {
      code[k] = p.m1.token_offset(s);
      scale[k] = p.m1.scale_offset(s);
      rope[k] = code[k] + M::kNope;
    } else {
      code[k] = s * L::kRecord;
      scale[k] = code[k] + L::kScaleOff;
      rope[k] = code[k] + L::kRopeOff;
    }
  }
  CudaStore st;
  st.T = T;
  st.nope = p.model1 ? M::kNope : L::kNope;
  st.tile = p.model1 ? M::kTile : L::kTile;
  st.tiles = p.model1 ? M::kTiles : L::kTiles;
  st.e8m0 = p.model1;
  st.quant = p.quant;
  st.kv_c = kv_c.data<std::uint16_t>();
  st.k_pe = c.input("k_pe").data<std::uint16_t>();
  st.code_off = code.data();
  st.scale_off = scale.data();
  st.rope_off = rope.data();
  store_cuda(cache.data<std::uint8_t>(), static_cast<std::int64_t>(cache.nbytes()), st);
  return e;
}

}  // namespace dsa::mla::kcache_store
#endif
