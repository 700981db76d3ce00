// mla.kcache_store CPU reference: tokens in parallel (distinct slots, checked by parse()).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
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
  r.describe = [layout, m1, model1, writer](std::int64_t byte) {
    std::int64_t slot = byte / L::kRecord;
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

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  using M = layouts::Model1KCache;
  const Tensor& kv_c = c.input("kv_c");
  const Tensor& k_pe = c.input("k_pe");
  const Tensor& slots = c.input("slot_mapping");
  const std::int64_t T = kv_c.dim(0), nope = p.model1 ? M::kNope : L::kNope;
  Expected e = cpu_frame(c, p, opt);
  std::uint8_t* out = e.tensors.front().value.data<std::uint8_t>();
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
