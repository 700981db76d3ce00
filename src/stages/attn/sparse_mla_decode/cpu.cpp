// attn.sparse_mla_decode CPU reference: (batch, query token) rows in parallel, one RowEngine per thread.
#include <omp.h>

#include <string>

#include "stages/attn/sparse_mla_decode/core.hpp"

namespace dsa::attn::sparse_mla_decode {

using L = layouts::MlaKCache;

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& cache = c.input("k_cache");
  const Tensor& idx = c.input("indices");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* tl = c.input_opt("topk_length");
  const Tensor* xc = p.extra ? c.input_opt("extra_k_cache") : nullptr;
  const Tensor* xi = p.extra ? c.input_opt("extra_indices_in_kvcache") : nullptr;
  const Tensor* xl = p.extra ? c.input_opt("extra_topk_length") : nullptr;
  const std::int64_t XK = xi ? xi->dim(2) : 0;
  const std::int64_t B = q.dim(0), S = q.dim(1), H = q.dim(2), D = q.dim(3), K = idx.dim(2), dv = L::kNope;
  Tensor out(DType::bf16, {B, S, H, dv}), out_m(DType::f64, {B, S, H, dv});
  Tensor lse(DType::f32, {B, H, S}), lse_m(DType::f64, {B, H, S}), lse_def(DType::u8, {B, H, S});
  const std::uint16_t* qb = q.data<std::uint16_t>();
  const std::uint8_t* base = cache.data<std::uint8_t>();
#pragma omp parallel num_threads(opt.thread_count())
  {
    RowEngine e;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t row = 0; row < B * S; ++row) {
      const std::int64_t b = row / S, s = row % S;
      const std::int64_t len = tl ? tl->int_at(b) : K;
      std::int64_t n = 0;
      for (std::int64_t pp = 0; pp < len; ++pp) n += idx.int_at(row * K + pp) != -1;
      const std::int64_t xlen = xi ? (xl ? xl->int_at(b) : XK) : 0;
      for (std::int64_t pp = 0; pp < xlen; ++pp) n += xi->int_at(row * XK + pp) != -1;
      e.reset(H, D, dv, n);
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) e.q(h)[d] = num::bf16_to_f64(qb[(row * H + h) * D + d]);
      std::int64_t j = 0;
      for (std::int64_t pp = 0; pp < len; ++pp) {
        const std::int64_t t = idx.int_at(row * K + pp);
        if (t == -1) continue;
        if (p.model1) dequant_key_model1(base, p.m1, t, e.key(j++));
        else dequant_key(base + t * L::kRecord, p.bf16_scale, e.key(j++));
      }
      for (std::int64_t pp = 0; pp < xlen; ++pp) {  // the extra scope, same softmax
        const std::int64_t t = xi->int_at(row * XK + pp);
        if (t == -1) continue;
        if (p.model1) dequant_key_model1(xc->data<std::uint8_t>(), p.m1_extra, t, e.key(j++));
        else dequant_key(xc->data<std::uint8_t>() + t * L::kRecord, p.bf16_scale, e.key(j++));
      }
      e.run(p.softmax_scale);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t fo = row * H + h, fl = (b * H + h) * S + s;
        HeadDst dst{out.data<std::uint16_t>() + fo * dv, out_m.data<double>() + fo * dv, lse.data<float>() + fl,
                    lse_m.data<double>() + fl, lse_def.data<std::uint8_t>() + fl};
        write_head(e, h, dv, sink ? sink->data<float>() + h : nullptr, p.cv, dst);
      }
    }
  }
  Expected ex;
  RefTensor o = bounded_ref("out", out, out_m);
  o.peers = {flashmla_metric(8e-4, 2.01 / 128, 5e-6)};
  o.describe = [S, H, dv](std::int64_t f) {
    const std::int64_t row = f / (H * dv);
    return "batch " + std::to_string(row / S) + " q token " + std::to_string(row % S) + " head " + std::to_string(f / dv % H) +
           " dim " + std::to_string(f % dv);
  };
  RefTensor l = bounded_ref("lse", lse, lse_m, lse_def);
  l.peers = {flashmla_metric(1e-6, 8.01 / 65536, -1.0)};
  l.describe = [S, H](std::int64_t f) {
    return "batch " + std::to_string(f / (H * S)) + " head " + std::to_string(f / S % H) + " q token " + std::to_string(f % S);
  };
  ex.tensors = {std::move(o), std::move(l)};
  return ex;
}

}  // namespace dsa::attn::sparse_mla_decode
