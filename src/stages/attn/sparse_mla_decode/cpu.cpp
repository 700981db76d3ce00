// attn.sparse_mla_decode reference: (batch, query token) rows in parallel on the row engine of the chosen backend
// (sparse_attn_rows.hpp: the same bits on both).
#include <string>
#include <vector>

#include "engines/sparse_attn/sparse_attn_rows.hpp"
#include "profiles/flashmla_sm90/decode_emu.hpp"
#include "profiles/profiles.hpp"
#include "stages/attn/sparse_mla_decode/stage.hpp"

namespace dsa::attn::sparse_mla_decode {

using L = layouts::MlaKCache;

namespace {

// Row `row` (= b * S + s)'s key ids in the reference order: the main scope's valid indices, then the extra scope's
// (same softmax). A main-cache slot t is id t, an extra-cache slot t is id `cap + t` (cap = the main cache's slots).
// minus1: every -1 within the row's length read as slot 0 of its scope (the B34 hypothesis).
void row_ids(const Case& c, const Params& p, std::int64_t row, bool minus1, std::vector<std::int64_t>& ids) {
  const Tensor& idx = c.input("indices");
  const Tensor* tl = c.input_opt("topk_length");
  const Tensor* xi = p.extra ? c.input_opt("extra_indices_in_kvcache") : nullptr;
  const Tensor* xl = p.extra ? c.input_opt("extra_topk_length") : nullptr;
  const std::int64_t S = c.input("q").dim(1), K = idx.dim(2), XK = xi ? xi->dim(2) : 0, b = row / S;
  const std::int64_t cap = c.input("k_cache").dim(0) * c.input("k_cache").dim(1);
  const std::int64_t len = tl ? tl->int_at(b) : K;
  const std::int64_t xcap = xi ? c.input("extra_k_cache").dim(0) * c.input("extra_k_cache").dim(1) : 0;
  // (-1 read as slot 0 only where the scope has a slot 0: an empty cache has nothing to read.)
  for (std::int64_t pp = 0; pp < len; ++pp)
    if (const std::int64_t t = idx.int_at(row * K + pp); t != -1 || (minus1 && cap > 0)) ids.push_back(t == -1 ? 0 : t);
  const std::int64_t xlen = xi ? (xl ? xl->int_at(b) : XK) : 0;
  for (std::int64_t pp = 0; pp < xlen; ++pp)
    if (const std::int64_t t = xi->int_at(row * XK + pp); t != -1 || (minus1 && xcap > 0)) ids.push_back(cap + (t == -1 ? 0 : t));
}

// The kernel's dequantized key of id (row_ids' numbering), the caches resolved once.
struct Keys {
  const Params* p;
  const std::uint8_t *main, *extra;
  std::int64_t cap;
  void operator()(std::int64_t id, double* k) const {
    const bool x = id >= cap;
    const std::int64_t t = x ? id - cap : id;
    if (p->misread_v32_no_rope && !x) dequant_key_v32_no_rope(main, t, k);
    else if (p->rec.f) dequant_key_record(x ? extra : main, x ? p->xrec : p->rec, t, k);
    else if (p->model1) dequant_key_model1(x ? extra : main, x ? p->m1_extra : p->m1, t, k);
    else dequant_key((x ? extra : main) + t * L::kRecord, p->bf16_scale, k);
  }
};
Keys keys_of(const Case& c, const Params& p) {
  const Tensor& cache = c.input("k_cache");
  const Tensor* xc = p.extra ? c.input_opt("extra_k_cache") : nullptr;
  return {&p, cache.data<std::uint8_t>(), xc ? xc->data<std::uint8_t>() : nullptr, cache.dim(0) * cache.dim(1)};
}

// The flashmla-sm90 emulation of the whole call (profiles/flashmla_sm90/decode_emu.hpp: the split-KV schedule of a
// GPU with attr num_sms SMs, the CTAs, the combine), on the host for either backend. Keys dequantized as the SM90
// kernel does (bf16 scales) whatever attr dequant says.
void add_flashmla_emulation(const Case& c, const Params& p, const RefOptions& opt, RefTensor& o, RefTensor& l) {
  const std::string name = profiles::flashmla_sm90().name;
  auto skip = [&](const std::string& why) { o.emulation_notes[name] = l.emulation_notes[name] = why; };
  if (p.rec.f || p.misread_v32_no_rope)
    return skip("layout " + (p.rec.f ? std::string(p.rec.f->name) : std::string("v32_no_rope")) +
                ": the sm90 decode kernel reads the mla_fp8_656 and model1_fp8_584 caches");
  if (p.cv.lse_includes_sink) return skip("lse_includes_sink: FlashMLA's lse is sink-exclusive");
  const Tensor& q = c.input("q");
  const Tensor& idx = c.input("indices");
  const Tensor* tl = c.input_opt("topk_length");
  const Tensor* xi = p.extra ? c.input_opt("extra_indices_in_kvcache") : nullptr;
  const Tensor* xl = p.extra ? c.input_opt("extra_topk_length") : nullptr;
  const Tensor* sink = c.input_opt("attn_sink");
  const std::int64_t B = q.dim(0), S = q.dim(1), H = q.dim(2);
  Params kp = p;
  kp.bf16_scale = true;
  const Keys keys = keys_of(c, kp);
  profiles::flashmla_emu::DecodeCall call;
  call.b = B, call.s_q = S, call.h_q = H, call.d_qk = q.dim(3);
  call.q = q.data<std::uint16_t>();
  call.key = [&](int scope, std::int64_t slot, double* k) { keys(scope ? keys.cap + slot : slot, k); };
  auto ints = [](const Tensor* t, std::vector<std::int64_t>& v) {
    if (!t) return;
    v.resize(static_cast<std::size_t>(t->numel()));
    for (std::int64_t i = 0; i < t->numel(); ++i) v[static_cast<std::size_t>(i)] = t->int_at(i);
  };
  ints(&idx, call.idx), ints(tl, call.length), ints(xi, call.xidx), ints(xl, call.xlength);
  call.topk = idx.dim(2), call.xtopk = xi ? xi->dim(2) : 0;
  call.sink = sink ? sink->data<float>() : nullptr;
  call.sm_scale = static_cast<float>(p.softmax_scale);
  call.num_sms = p.num_sms;
  Tensor eo(DType::bf16, {B, S, H, 512}), el(DType::f32, {B, H, S});
  std::vector<float> lse(static_cast<std::size_t>(B * S * H));
  std::string why;
  if (!profiles::flashmla_emu::decode(call, opt.thread_count(), eo.data<std::uint16_t>(), lse.data(), why)) return skip(why);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t s = 0; s < S; ++s)
      for (std::int64_t h = 0; h < H; ++h) el.data<float>()[(b * H + h) * S + s] = lse[static_cast<std::size_t>((b * S + s) * H + h)];
  o.emulations[name] = eo, l.emulations[name] = el;
}

}  // namespace

bool locate(const Case& c, const dsa::Params& pb, const std::string& tensor, std::int64_t f, MlaElement& e) {
  const auto& p = static_cast<const Params&>(pb);
  const Tensor& q = c.input("q");
  const std::int64_t B = q.dim(0), S = q.dim(1), H = q.dim(2), D = q.dim(3), dv = L::kNope;
  std::int64_t row = 0, h = 0;
  if (tensor == "out") {
    row = f / (H * dv), h = f / dv % H, e.dim = f % dv;
  } else if (tensor == "lse") {
    row = f / (H * S) * S + f % S, h = f / S % H;
  } else {
    return false;
  }
  if (f < 0 || row >= B * S) return false;
  e.q = q.data<std::uint16_t>() + (row * H + h) * D;
  e.D = D, e.dv = dv, e.rope = 64;
  e.scale = p.softmax_scale;
  row_ids(c, p, row, false, e.ids);
  row_ids(c, p, row, true, e.ids_minus1);
  e.key = keys_of(c, p);
  const Tensor* sink = c.input_opt("attn_sink");
  e.sink = sink ? sink->data<float>() + h : nullptr;
  e.cv = p.cv;
  return true;
}

Expected run(const Case& c, const Params& p, const RefOptions& opt, Backend backend) {
  const Tensor& q = c.input("q");
  const Tensor& cache = c.input("k_cache");
  const Tensor* sink = c.input_opt("attn_sink");
  const Tensor* xc = p.extra ? c.input_opt("extra_k_cache") : nullptr;
  const std::int64_t B = q.dim(0), S = q.dim(1), H = q.dim(2), D = q.dim(3), dv = L::kNope;
  Tensor out(DType::bf16, {B, S, H, dv}), out_m(DType::f64, {B, S, H, dv});
  Tensor lse(DType::f32, {B, H, S}), lse_m(DType::f64, {B, H, S}), lse_def(DType::u8, {B, H, S});
  const std::int64_t cap = cache.dim(0) * cache.dim(1), xcap = xc ? xc->dim(0) * xc->dim(1) : 0;
  RowSource src;
  src.R = B * S, src.H = H, src.D = D, src.dv = dv;
  src.q = q.data<std::uint16_t>();
  src.sm = p.softmax_scale;
  src.ids = [&](std::int64_t row, std::vector<std::int64_t>& ids) { row_ids(c, p, row, false, ids); };
  src.key = keys_of(c, p);
  src.id_space = cap + xcap;
  run_rows(src, backend, opt.thread_count(), [&](std::int64_t row, const RowView& v) {
    const std::int64_t b = row / S, s = row % S;
    for (std::int64_t h = 0; h < H; ++h) {
      const std::int64_t fo = row * H + h, fl = (b * H + h) * S + s;
      HeadDst dst{out.data<std::uint16_t>() + fo * dv, out_m.data<double>() + fo * dv, lse.data<float>() + fl,
                  lse_m.data<double>() + fl, lse_def.data<std::uint8_t>() + fl};
      write_head(v, h, dv, sink ? sink->data<float>() + h : nullptr, p.cv, dst);
    }
  });
  Expected ex;
  RefTensor o = bounded_ref("out", out, out_m);
  o.systematic_floor = kSystematicOut;
  o.peers = {flashmla_metric(8e-4, 2.01 / 128, 5e-6)};
  o.describe = [S, H, dv](std::int64_t f) {
    const std::int64_t row = f / (H * dv);
    return "batch " + std::to_string(row / S) + " q token " + std::to_string(row % S) + " head " + std::to_string(f / dv % H) +
           " dim " + std::to_string(f % dv);
  };
  RefTensor l = bounded_ref("lse", lse, lse_m, lse_def);
  l.systematic_floor = kSystematicLse;
  l.peers = {flashmla_metric(1e-6, 8.01 / 65536, -1.0)};
  l.describe = [S, H](std::int64_t f) {
    return "batch " + std::to_string(f / (H * S)) + " head " + std::to_string(f / S % H) + " q token " + std::to_string(f % S);
  };
  if (opt.emulates(profiles::flashmla_sm90())) add_flashmla_emulation(c, p, opt, o, l);
  ex.tensors = {std::move(o), std::move(l)};
  return ex;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, opt, Backend::cpu); }

}  // namespace dsa::attn::sparse_mla_decode
