// mla.kcache_store CPU reference: tokens in parallel (distinct slots, checked by parse()).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "numerics/fp8_core.hpp"
#include "engines/kv_cache/mla_records.hpp"
#include "stages/mla/kcache_store/stage.hpp"

namespace dsa::mla::kcache_store {

using L = layouts::MlaKCache;

Expected cpu_frame(const Case& c, const Params& p, const RefOptions&) {
  using M = layouts::Model1KCache;
  const Tensor& slots = c.input("slot_mapping");
  const Tensor& cache_in = c.input("kv_cache_in");
  const std::int64_t T = slots.numel();
  const std::int64_t capacity = cache_in.dim(0) * p.layout.page_size;
  auto writer = std::make_shared<std::vector<std::int64_t>>(static_cast<std::size_t>(capacity), -1);
  for (std::int64_t t = 0; t < T; ++t)
    if (const std::int64_t s = slots.int_at(t); s >= 0) (*writer)[static_cast<std::size_t>(s)] = t;  // distinct (parse)

  Expected e;
  RefTensor r;
  r.name = "kv_cache";
  r.kind = CompareKind::bytes;
  r.value = cache_in.clone();
  const L layout = p.layout;
  const M m1 = p.m1;
  const bool model1 = p.model1;
  const bool record = p.record;
  const layouts::KvRecord kvr = p.rp.rec;
  r.describe = [layout, m1, model1, record, kvr, writer](std::int64_t byte) {
    std::int64_t slot = byte / L::kRecord;
    if (record) {
      slot = kvr.slot_of(byte);
      const std::int64_t w = slot < static_cast<std::int64_t>(writer->size()) ? (*writer)[static_cast<std::size_t>(slot)] : -1;
      const std::string d = kvr.describe(byte);
      const bool pad = kvr.f->pad_untouched && d.find(" pad byte ") != std::string::npos;
      return d + " (slot " + std::to_string(slot) +
             (w >= 0 ? pad ? ", stored from token " + std::to_string(w) + "; its writer never stores pad bytes: must equal kv_cache_in)"
                           : ", stored from token " + std::to_string(w) + ")"
                     : ", not written by this store: must equal kv_cache_in)");
    }
    if (model1) {  // token records, then scale records, per block
      const std::int64_t blk = m1.page_size * M::kRecord, in = byte % blk, tok_bytes = m1.page_size * M::kToken;
      slot = byte / blk * m1.page_size + (in < tok_bytes ? in / M::kToken : (in - tok_bytes) / M::kScaleRec);
    }
    const std::int64_t w = slot < static_cast<std::int64_t>(writer->size()) ? (*writer)[static_cast<std::size_t>(slot)] : -1;
    return (model1 ? m1.describe(byte) : layout.describe(byte)) + " (slot " + std::to_string(slot) +
           (w >= 0 ? ", stored from token " + std::to_string(w) + ")" : ", not written by this store: must equal kv_cache_in)");
  };
  e.tensors.push_back(std::move(r));
  return e;
}

std::vector<float> record_values(const Case& c, const Params& p) {
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& k_pe = c.input("k_pe");
  const layouts::RecordFormat& f = *p.rp.rec.f;
  const std::int64_t T = kv_c.dim(0), dim = f.dim();
  std::vector<float> x(static_cast<std::size_t>(T * dim));
  for (std::int64_t t = 0; t < T; ++t) {
    float* row = x.data() + t * dim;
    for (std::int64_t d = 0; d < f.nope; ++d) row[d] = num::bf16_to_f32(kv_c.data<std::uint16_t>()[t * f.nope + d]);
    for (std::int64_t d = 0; d < f.rope; ++d) {
      const float v = k_pe.dtype() == DType::f32 ? k_pe.data<float>()[t * f.rope + d] : num::bf16_to_f32(k_pe.data<std::uint16_t>()[t * f.rope + d]);
      row[f.nope + d] = p.rp.rope_bf16_source ? num::round_to_bf16(v) : v;
    }
  }
  return x;
}

Expected cpu_record(const Case& c, const Params& p, RecordBug bug, int threads) {
  if (!p.record) throw std::invalid_argument("mla.kcache_store: the kv record writer needs a kv record layout (attr layout)");
  using B = RecordBug;
  using fp4core::Tie;
  using fp4core::ZeroSign;
  Params q = p;
  layouts::RecordFormat f = *p.rp.rec.f;
  q.rp.rec.f = &f;
  auto& qq = q.rp.quant;
  switch (bug) {
    case B::rope_fp32: q.rp.rope_bf16_source = false; break;
    case B::tie_flip: qq.e2m1.tie = qq.e2m1.tie == Tie::rne ? Tie::half_down : Tie::rne; break;
    case B::zero_flip: qq.e2m1.zero = qq.e2m1.zero == ZeroSign::clear ? ZeroSign::keep : ZeroSign::clear; break;
    case B::codes_unrounded_scale: qq.codes_unrounded_scale = true; break;
    case B::order_swapped:
      q.rp.rec.order = q.rp.rec.order == layouts::RecordOrder::page_segregated ? layouts::RecordOrder::token_interleaved
                                                                                : layouts::RecordOrder::page_segregated;
      break;
    case B::scales_unpermuted: f.scale_order = layouts::ScaleOrder::natural; break;
    case B::mx4_floor_1e4: qq.mx4 = fp4core::Mx4Rule::ref_floor_1e4; break;
    default: break;
  }
  RefOptions opt;
  opt.threads = bug == B::none ? threads : 1;  // a bug may store two tokens into one slot: in token order
  Expected e = cpu_frame(c, p, opt);
  std::uint8_t* out = e.tensors.front().value.data<std::uint8_t>();
  const Tensor& slots = c.input("slot_mapping");
  const std::int64_t T = slots.numel(), dim = f.dim(), capacity = c.input("kv_cache_in").dim(0) * q.rp.rec.page_size;
  const std::vector<float> x = record_values(c, q);
  const int ci = f.region_index(layouts::RegionKind::codes);
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
  for (std::int64_t t = 0; t < T; ++t) {
    std::int64_t s = slots.int_at(t);
    if (s < 0) continue;
    if (bug == B::scatter_row_offset) {
      s += t;
      if (s >= capacity) continue;
    }
    layouts::store_record(q.rp.rec, x.data() + t * dim, s, out, qq);
    if (bug == B::nibbles_swapped && f.fp4()) {
      std::uint8_t* cb = out + q.rp.rec.region_offset(s, ci);
      for (int k = 0; k < f.code_bytes(); ++k) cb[k] = static_cast<std::uint8_t>((cb[k] >> 4) | (cb[k] << 4));
    }
  }
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  using M = layouts::Model1KCache;
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& k_pe = c.input("k_pe");
  const Tensor& slots = c.input("slot_mapping");
  const std::int64_t T = kv_c.dim(0), nope = p.record ? p.rp.rec.f->nope : p.model1 ? M::kNope : L::kNope;
  Expected e = cpu_frame(c, p, opt);
  std::uint8_t* out = e.tensors.front().value.data<std::uint8_t>();
  if (p.record) return cpu_record(c, p, RecordBug::none, opt.thread_count());
#pragma omp parallel for schedule(static) num_threads(opt.thread_count())
  for (std::int64_t t = 0; t < T; ++t) {
    const std::int64_t s = slots.int_at(t);
    if (s < 0) continue;  // padded token
    const std::uint16_t* ct = kv_c.data<std::uint16_t>() + t * nope;
    const std::uint16_t* pt = k_pe.data<std::uint16_t>() + t * L::kRope;
    if (p.model1) engines::kv_cache::store_model1_token(p.m1, p.quant, ct, pt, out, s);
    else engines::kv_cache::store_mla_token(p.quant, ct, pt, out + s * L::kRecord);
  }
  return e;
}

}  // namespace dsa::mla::kcache_store
