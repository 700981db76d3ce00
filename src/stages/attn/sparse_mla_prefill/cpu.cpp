// attn.sparse_mla_prefill CPU reference: query rows in parallel, one RowEngine per thread (fixed order per row).
#include <omp.h>

#include <memory>
#include <string>

#include "numerics/formats.hpp"
#include "stages/attn/sparse_mla_prefill/core.hpp"

namespace dsa::attn::sparse_mla_prefill {

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const Tensor& idx = c.input("indices");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* tl = c.input_opt("topk_length");
  const std::int64_t S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0), K = idx.dim(2), dv = p.dv;
  Tensor out(DType::bf16, {S, H, dv}), out_m(DType::f64, {S, H, dv});
  Tensor lse(DType::f32, {S, H}), lse_m(DType::f64, {S, H}), lse_def(DType::u8, {S, H});
  Tensor ml(DType::f32, {S, H}), ml_m(DType::f64, {S, H}), ml_def(DType::u8, {S, H});
  const std::uint16_t* qb = q.data<std::uint16_t>();
  const std::uint16_t* kb = kv.data<std::uint16_t>();
#pragma omp parallel num_threads(opt.thread_count())
  {
    RowEngine e;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < S; ++i) {
      const std::int64_t len = tl ? tl->int_at(i) : K;
      std::int64_t n = 0;
      for (std::int64_t pp = 0; pp < len; ++pp) {
        const std::int64_t t = idx.int_at(i * K + pp);
        n += t >= 0 && t < N;
      }
      e.reset(H, D, dv, n);
      for (std::int64_t h = 0; h < H; ++h)
        for (std::int64_t d = 0; d < D; ++d) e.q(h)[d] = num::bf16_to_f64(qb[(i * H + h) * D + d]);
      std::int64_t j = 0;
      for (std::int64_t pp = 0; pp < len; ++pp) {
        const std::int64_t t = idx.int_at(i * K + pp);
        if (t < 0 || t >= N) continue;
        double* k = e.key(j++);
        for (std::int64_t d = 0; d < D; ++d) k[d] = num::bf16_to_f64(kb[t * D + d]);
      }
      e.run(p.sm_scale);
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t f = i * H + h;
        HeadDst dst{out.data<std::uint16_t>() + f * dv, out_m.data<double>() + f * dv, lse.data<float>() + f,
                    lse_m.data<double>() + f,           lse_def.data<std::uint8_t>() + f, ml.data<float>() + f,
                    ml_m.data<double>() + f,            ml_def.data<std::uint8_t>() + f};
        write_head(e, h, dv, sink ? sink->data<float>() + h : nullptr, p.cv, dst);
      }
    }
  }
  Expected ex;
  RefTensor o = bounded_ref("out", out, out_m);
  o.peers = {flashmla_metric(8e-4, 2.01 / 128, 7e-6)};
  o.describe = [H, dv](std::int64_t f) {
    return "q row " + std::to_string(f / (H * dv)) + " head " + std::to_string(f / dv % H) + " dim " + std::to_string(f % dv);
  };
  auto row_head = [H](std::int64_t f) { return "q row " + std::to_string(f / H) + " head " + std::to_string(f % H); };
  RefTensor m = bounded_ref("max_logits", ml, ml_m, ml_def);
  m.peers = {flashmla_metric(1e-6, 2.01 / 65536, -1.0)};
  m.describe = row_head;
  RefTensor l = bounded_ref("lse", lse, lse_m, lse_def);
  l.peers = {flashmla_metric(1e-6, 2.01 / 65536, -1.0)};
  l.describe = row_head;
  ex.tensors = {std::move(o), std::move(m), std::move(l)};
  return ex;
}

}  // namespace dsa::attn::sparse_mla_prefill
