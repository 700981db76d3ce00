// attn.sparse_mla_prefill reference: query rows in parallel on the row engine of the chosen backend (fixed order
// per row, the same bits on both: sparse_attn_rows.hpp).
#include <omp.h>

#include <memory>
#include <string>

#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "engines/sparse_attn/sparse_attn_rows.hpp"
#include "profiles/flashmla_sm90/prefill_emu.hpp"
#include "profiles/profiles.hpp"
#include "stages/attn/sparse_mla_prefill/stage.hpp"

namespace dsa::attn::sparse_mla_prefill {

namespace {
// Row i's key ids in the reference order: its valid indices (< topk_length, in [0, s_kv)); minus1: every -1 within
// the length read as kv row 0 (the B34 hypothesis).
void row_ids(const Tensor& idx, const Tensor* tl, std::int64_t N, std::int64_t i, bool minus1, std::vector<std::int64_t>& ids) {
  const std::int64_t K = idx.dim(2), len = tl ? tl->int_at(i) : K;
  for (std::int64_t pp = 0; pp < len; ++pp)
    if (const std::int64_t t = idx.int_at(i * K + pp); (t >= 0 && t < N) || (minus1 && t == -1 && N > 0)) ids.push_back(t == -1 ? 0 : t);
}
}  // namespace

bool locate(const Case& c, const dsa::Params& pb, const std::string& tensor, std::int64_t f, MlaElement& e) {
  const auto& p = static_cast<const Params&>(pb);
  const Tensor &q = c.input("q"), &kv = c.input("kv"), &idx = c.input("indices");
  const std::int64_t S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0);
  std::int64_t i = 0, h = 0;
  if (tensor == "out") i = f / (H * p.dv), h = f / p.dv % H, e.dim = f % p.dv;
  else if (tensor == "lse" || tensor == "max_logits") i = f / H, h = f % H;
  else return false;
  if (f < 0 || i >= S) return false;
  e.q = q.data<std::uint16_t>() + (i * H + h) * D;
  e.D = D, e.dv = p.dv, e.rope = 64;
  e.scale = p.sm_scale;
  row_ids(idx, c.input_opt("topk_length"), N, i, false, e.ids);
  row_ids(idx, c.input_opt("topk_length"), N, i, true, e.ids_minus1);
  const std::uint16_t* kb = kv.data<std::uint16_t>();
  e.key = [kb, D](std::int64_t t, double* k) { num::bf16_to_f64_n(kb + t * D, D, k); };
  const Tensor* sink = c.input_opt("attn_sink");
  e.sink = sink ? sink->data<float>() + h : nullptr;
  e.cv = p.cv;
  return true;
}

namespace {
// The flashmla-sm90 emulation of every query row (profiles/flashmla_sm90/prefill_emu.hpp; the same host code under
// both backends), attached to out / max_logits / lse; none where the model does not apply (the kernel's 2026+
// conventions only: natural log, lonely lse +inf, sink-exclusive lse) -- those outputs are judged by the bound.
void add_flashmla_emulation(const Case& c, const Params& p, const RefOptions& opt, RefTensor& o, RefTensor& m, RefTensor& l) {
  const std::string name = profiles::flashmla_sm90().name;
  auto skip = [&](const std::string& why) {
    for (RefTensor* t : {&o, &m, &l}) t->emulation_notes[name] = why;
  };
  if (p.cv.base2 || !p.cv.lonely_lse_pos_inf || p.cv.lse_includes_sink)
    return skip("the case's lse conventions (lse_base / lse_includes_sink) are not the sm90 kernel's natural, sink-exclusive lse");
  const Tensor &q = c.input("q"), &kv = c.input("kv"), &idx = c.input("indices");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* tl = c.input_opt("topk_length");
  const std::int64_t S = q.dim(0), H = q.dim(1), D = q.dim(2), K = idx.dim(2);
  if (p.dv != 512) return skip("d_v " + std::to_string(p.dv) + " (the sm90 kernel: 512)");
  Tensor eo(DType::bf16, {S, H, 512}), em(DType::f32, {S, H}), el(DType::f32, {S, H});
  std::string why;  // the first failing row's reason (deterministic for any thread count)
  std::int64_t first = S;
#pragma omp parallel for schedule(dynamic, 1) num_threads(opt.thread_count())
  for (std::int64_t i = 0; i < S; ++i) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(K));
    for (std::int64_t k = 0; k < K; ++k) ids[static_cast<std::size_t>(k)] = idx.int_at(i * K + k);
    profiles::flashmla_emu::PrefillRow r;
    r.q = q.data<std::uint16_t>() + i * H * D, r.h_q = H, r.d_qk = D;
    r.kv = kv.data<std::uint16_t>(), r.s_kv = kv.dim(0);
    r.idx = ids.data(), r.topk = K, r.length = tl ? tl->int_at(i) : -1;
    r.sink = sink ? sink->data<float>() : nullptr;
    r.sm_scale = static_cast<float>(p.sm_scale);
    std::string w;
    if (!profiles::flashmla_emu::prefill_row(r, eo.data<std::uint16_t>() + i * H * 512, em.data<float>() + i * H, el.data<float>() + i * H, w))
#pragma omp critical(flashmla_prefill_why)
      if (i < first) first = i, why = "q row " + std::to_string(i) + ": " + w;
  }
  if (!why.empty()) return skip(why);
  o.emulations[name] = eo, m.emulations[name] = em, l.emulations[name] = el;
}
}  // namespace

Expected run(const Case& c, const Params& p, const RefOptions& opt, Backend backend) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const Tensor& idx = c.input("indices");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* tl = c.input_opt("topk_length");
  const std::int64_t S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0), dv = p.dv;
  Tensor out(DType::bf16, {S, H, dv}), out_m(DType::f64, {S, H, dv});
  Tensor lse(DType::f32, {S, H}), lse_m(DType::f64, {S, H}), lse_def(DType::u8, {S, H});
  Tensor ml(DType::f32, {S, H}), ml_m(DType::f64, {S, H}), ml_def(DType::u8, {S, H});
  const std::uint16_t* kb = kv.data<std::uint16_t>();
  RowSource src;
  src.R = S, src.H = H, src.D = D, src.dv = dv;
  src.q = q.data<std::uint16_t>();
  src.sm = p.sm_scale;
  src.ids = [&](std::int64_t i, std::vector<std::int64_t>& ids) { row_ids(idx, tl, N, i, false, ids); };
  src.key = [&](std::int64_t t, double* k) { num::bf16_to_f64_n(kb + t * D, D, k); };
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
  if (opt.emulates(profiles::flashmla_sm90())) add_flashmla_emulation(c, p, opt, o, m, l);
  ex.tensors = {std::move(o), std::move(m), std::move(l)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, opt, Backend::cpu); }

}  // namespace dsa::attn::sparse_mla_prefill
