// attn.sparse_mla_prefill reference: query rows in parallel on the row engine of the chosen backend (fixed order
// per row, the same bits on both: sparse_attn_rows.hpp).
#include <memory>
#include <string>

#include "numerics/formats.hpp"
#include "engines/sparse_attn/sparse_attn_rows.hpp"
#include "stages/attn/sparse_mla_prefill/stage.hpp"

namespace dsa::attn::sparse_mla_prefill {

Expected run(const Case& c, const Params& p, const RefOptions& opt, Backend backend) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const Tensor& idx = c.input("indices");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* tl = c.input_opt("topk_length");
  const std::int64_t S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0), K = idx.dim(2), dv = p.dv;
  Tensor out(DType::bf16, {S, H, dv}), out_m(DType::f64, {S, H, dv});
  Tensor lse(DType::f32, {S, H}), lse_m(DType::f64, {S, H}), lse_def(DType::u8, {S, H});
  Tensor ml(DType::f32, {S, H}), ml_m(DType::f64, {S, H}), ml_def(DType::u8, {S, H});
  const std::uint16_t* kb = kv.data<std::uint16_t>();
  RowSource src;
  src.R = S, src.H = H, src.D = D, src.dv = dv;
  src.q = q.data<std::uint16_t>();
  src.sm = p.sm_scale;
  src.ids = [&](std::int64_t i, std::vector<std::int64_t>& ids) {  // the valid indices of the row, in order
    const std::int64_t len = tl ? tl->int_at(i) : K;
    for (std::int64_t pp = 0; pp < len; ++pp)
      if (const std::int64_t t = idx.int_at(i * K + pp); t >= 0 && t < N) ids.push_back(t);
  };
  src.key = [&](std::int64_t t, double* k) {
    for (std::int64_t d = 0; d < D; ++d) k[d] = num::bf16_to_f64(kb[t * D + d]);
  };
  src.id_space = N;
  src.bf16_table = kb;
  run_rows(src, backend, opt.thread_count(), [&](std::int64_t i, const RowView& v) {
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t f = i * H + h;
      HeadDst dst{out.data<std::uint16_t>() + f * dv, out_m.data<double>() + f * dv, lse.data<float>() + f,
                  lse_m.data<double>() + f,           lse_def.data<std::uint8_t>() + f, ml.data<float>() + f,
                  ml_m.data<double>() + f,            ml_def.data<std::uint8_t>() + f};
      write_head(v, h, dv, sink ? sink->data<float>() + h : nullptr, p.cv, dst);
    }
  });
  Expected ex;
  RefTensor o = bounded_ref("out", out, out_m);
  o.systematic_floor = kSystematicOut;
  o.peers = {flashmla_metric(8e-4, 2.01 / 128, 7e-6)};
  o.describe = [H, dv](std::int64_t f) {
    return "q row " + std::to_string(f / (H * dv)) + " head " + std::to_string(f / dv % H) + " dim " + std::to_string(f % dv);
  };
  auto row_head = [H](std::int64_t f) { return "q row " + std::to_string(f / H) + " head " + std::to_string(f % H); };
  RefTensor m = bounded_ref("max_logits", ml, ml_m, ml_def);
  m.peers = {flashmla_metric(1e-6, 2.01 / 65536, -1.0)};
  m.describe = row_head;
  RefTensor l = bounded_ref("lse", lse, lse_m, lse_def);
  l.systematic_floor = kSystematicLse;
  l.peers = {flashmla_metric(1e-6, 2.01 / 65536, -1.0)};
  l.describe = row_head;
  ex.tensors = {std::move(o), std::move(m), std::move(l)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, opt, Backend::cpu); }

}  // namespace dsa::attn::sparse_mla_prefill
