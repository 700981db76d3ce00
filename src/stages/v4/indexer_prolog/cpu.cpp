// v4.indexer_prolog reference: rows in parallel (each row independent; exact: any thread count, same bytes), each
// through core.hpp's DSA_HD functions; the host parts both backends share (run_with: the RoPE rows, the packaging and
// the cache scatter around the row loops, which cuda.cpp runs on the device).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>

#include "engines/quant/byte_cands.hpp"
#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "numerics/hadamard.hpp"
#include "stages/v4/indexer_prolog/stage.hpp"

namespace dsa::v4::indexer_prolog {

using i64 = std::int64_t;

void rotate_row(const std::uint16_t* x, i64 D, const float* cos_v, const float* sin_v, HadamardKind kind, std::uint16_t* out,
                double* bound, Bug bug) {
  // r: the reference's bf16 RoPE output; [lo, hi]: the bf16 values a kernel with the fp32 error may produce.
  std::vector<std::uint16_t> r(static_cast<std::size_t>(D)), lo(r.size()), hi(r.size());
  std::vector<float> f(kind == HadamardKind::fwht ? r.size() : 0);
  const RowStats st = prep_row(x, D, cos_v, sin_v, kind, bug, r.data(), lo.data(), hi.data(), f.data());
  const float s32 = dsa::num::hadamard_scale_f32(D);
  for (i64 i = 0; i < D; ++i) rot_elem(i, D, kind, r.data(), lo.data(), hi.data(), f.data(), st, s32, bug, out + i, bound + i);
}

i64 slot_of(const Case& c, const Params& p, i64 r) {
  const Tensor& sm = c.input("slot_mapping");
  if (!p.pairs) return sm.int_at(r) < 0 ? -1 : sm.int_at(r);
  const i64 blk = sm.int_at(2 * r), off = sm.int_at(2 * r + 1);
  return blk < 0 ? -1 : blk * p.bs + off;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  const int nt = std::max(1, threads);
  RowLoops loops;
  loops.rotate = [&](const std::uint16_t* pre, i64 T, i64 H, i64 D, const float* cs, const float* sn, std::uint16_t* out, double* bound) {
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < T * H; ++r) {
      const i64 t = r / H;
      rotate_row(pre + r * D, D, cs + t * 32, sn + t * 32, p.hadamard, out + r * D, bound + r * D, bug);
    }
  };
  loops.quant = [&](const std::uint16_t* x, i64 R, i64 D, std::int8_t* codes, std::uint16_t* scales) {
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < R; ++r) scales[r] = scale_fp16(dynamic_quant_int8(x + r * D, D, p.amax_zero, codes + r * D, bug));
  };
  loops.weights = [&](const std::uint16_t* w, i64 n, std::uint16_t* out) {
    for (i64 i = 0; i < n; ++i) out[i] = a3_weight(w[i], bug);
  };
  loops.vq = [&](const std::uint16_t* x, i64 T, i64 H, i64 D, const float* cs, const float* sn, const float* w, float sm, float hs,
                 std::uint8_t* codes, double* bound, float* wout, double* wbound) {
#pragma omp parallel num_threads(nt)
    {
      std::vector<std::uint16_t> r(static_cast<std::size_t>(D)), lo(r.size()), hi(r.size());
#pragma omp for schedule(static)
      for (i64 row = 0; row < T * H; ++row) {
        const i64 t = row / H;
        vllm_q_row(x + row * D, D, cs + t * 32, sn + t * 32, w[row], sm, hs, bug, r.data(), lo.data(), hi.data(), codes + row * D,
                   bound + row * D, wout + row, wbound + row);
      }
    }
  };
  return run_with(c, p, loops);
}

namespace {

// Kernel vllm-cuda with q_format mxfp4 (DeepSeek-V4.1, fused_indexer_q_rope_quant(use_fp4=True)): per (token,
// head) the nope dims' 32-blocks from the bf16 input (exact), the RoPE dims (GPT-J pairs at the token's position)
// computed in fp32 and rounded to bf16, each 32-block MXFP4 (ceil rule, floor 6 * 2^-126); weights_out = fl32(fl32(w
// * softmax_scale) * head_scale). The RoPE values in fp64 with the fp32 kernel's bound (2^-23 (|x_e c| + |x_o s|),
// an FMA included): their bytes with candidates (engines/quant/byte_cands). Host code both backends run.
Expected run_vllm_mxfp4(const Case& c, const Params& p) {
  const Tensor& x = c.input("index_q");
  const Tensor& pos = c.input("positions");
  const Tensor& cache = c.input("cos_sin_cache");
  const Tensor& wt = c.input("index_weights");
  const i64 T = x.dim(0), H = x.dim(1), D = x.dim(2), W = cache.dim(1), nope = D - 64;
  auto cval = [&](i64 i) { return cache.dtype() == DType::bf16 ? num::bf16_to_f64(cache.data<std::uint16_t>()[i]) : static_cast<double>(cache.data<float>()[i]); };
  Tensor q4(DType::u8, {T, H, D / 2}), qs(DType::u8, {T, H, D / 32}), wo(DType::f32, {T, H}), wb(DType::f64, {T, H});
  std::vector<quant::ByteOut> outs(static_cast<std::size_t>(T * H));
#pragma omp parallel for schedule(static)
  for (i64 row = 0; row < T * H; ++row) {
    const i64 t = row / H, ps = pos.int_at(t);
    std::vector<double> y(static_cast<std::size_t>(D)), ey(y.size(), 0.0);
    num::bf16_to_f64_n(x.data<std::uint16_t>() + row * D, D, y.data());
    for (i64 i = 0; i < 32; ++i) {
      const double cs = cval(ps * W + i), sn = cval(ps * W + W / 2 + i);
      const double e = y[static_cast<std::size_t>(nope + 2 * i)], o = y[static_cast<std::size_t>(nope + 2 * i + 1)];
      y[static_cast<std::size_t>(nope + 2 * i)] = e * cs - o * sn;
      y[static_cast<std::size_t>(nope + 2 * i + 1)] = o * cs + e * sn;
      ey[static_cast<std::size_t>(nope + 2 * i)] = 0x1p-23 * (std::fabs(e * cs) + std::fabs(o * sn));
      ey[static_cast<std::size_t>(nope + 2 * i + 1)] = 0x1p-23 * (std::fabs(o * cs) + std::fabs(e * sn));
    }
    for (i64 b = 0; b < D / 32; ++b)
      quant::mxfp4_block_cands(y.data() + 32 * b, ey.data() + 32 * b, fp4core::Mx4Rule::ref, {}, outs[static_cast<std::size_t>(row)],
                               row * (D / 2) + 16 * b, (T * H * D / 2) + row * (D / 32) + b);  // scale bytes after all code bytes
    const float w = wt.dtype() == DType::bf16 ? num::bf16_to_f32(wt.data<std::uint16_t>()[row]) : wt.data<float>()[row];
    wo.data<float>()[row] = (w * static_cast<float>(p.softmax_scale)) * static_cast<float>(p.head_scale);
    wb.data<double>()[row] = 0;
  }
  auto c4 = std::make_shared<quant::ByteCandMap>(), cs = std::make_shared<quant::ByteCandMap>();
  const i64 nq = T * H * D / 2;  // the writers number the code bytes, then the scale bytes
  for (const auto& o : outs) {
    o.apply(q4.data<std::uint8_t>(), *c4, 0, nq);
    o.apply(qs.data<std::uint8_t>(), *cs, nq);
  }
  Expected e;
  RefTensor a;
  a.name = "q_fp4";
  a.value = q4;
  if (!c4->empty()) a.candidates = c4;
  a.describe = [H, D](i64 f) {
    return "token " + std::to_string(f / (H * D / 2)) + " head " + std::to_string(f / (D / 2) % H) + " dims " + std::to_string(2 * (f % (D / 2))) + "," +
           std::to_string(2 * (f % (D / 2)) + 1);
  };
  RefTensor s;
  s.name = "q_fp4_scale";
  s.value = qs;
  if (!cs->empty()) s.candidates = cs;
  s.describe = [H, D](i64 f) {
    const i64 nb = D / 32;
    return "token " + std::to_string(f / (H * nb)) + " head " + std::to_string(f / nb % H) + " scale " + std::to_string(f % nb) + " (dims " +
           std::to_string(32 * (f % nb)) + ".." + std::to_string(32 * (f % nb) + 31) + ")";
  };
  RefTensor b;
  b.name = "weights_out";
  b.kind = CompareKind::bounded;
  b.value = wo;
  b.magnitude = wb;
  b.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
  e.tensors.push_back(std::move(a));
  e.tensors.push_back(std::move(s));
  e.tensors.push_back(std::move(b));
  return e;
}

// Kernel vllm-cuda: the fp8 indexer q path (core.hpp vllm_q_row), the cos / sin rows gathered at the positions.
Expected run_vllm(const Case& c, const Params& p, const RowLoops& loops) {
  if (p.mxfp4) return run_vllm_mxfp4(c, p);
  const Tensor& x = c.input("index_q");
  const Tensor& pos = c.input("positions");
  const Tensor& cache = c.input("cos_sin_cache");
  const Tensor& wt = c.input("index_weights");
  const i64 T = x.dim(0), H = x.dim(1), D = x.dim(2), W = cache.dim(1);
  std::vector<float> cs(static_cast<std::size_t>(T * 32)), sn(cs.size()), w(static_cast<std::size_t>(T * H));
  auto cval = [&](i64 i) { return cache.dtype() == DType::bf16 ? num::bf16_to_f32(cache.data<std::uint16_t>()[i]) : cache.data<float>()[i]; };
  for (i64 t = 0; t < T; ++t)
    for (i64 i = 0; i < 32; ++i) {
      cs[static_cast<std::size_t>(t * 32 + i)] = cval(pos.int_at(t) * W + i);
      sn[static_cast<std::size_t>(t * 32 + i)] = cval(pos.int_at(t) * W + W / 2 + i);
    }
  for (i64 i = 0; i < T * H; ++i)
    w[static_cast<std::size_t>(i)] = wt.dtype() == DType::bf16 ? num::bf16_to_f32(wt.data<std::uint16_t>()[i]) : wt.data<float>()[i];
  Tensor q8(DType::fp8_e4m3fn, {T, H, D}, Tensor::Uninit{}), qb(DType::f64, {T, H, D}, Tensor::Uninit{});
  Tensor wo(DType::f32, {T, H}, Tensor::Uninit{}), wb(DType::f64, {T, H}, Tensor::Uninit{});
  loops.vq(x.data<std::uint16_t>(), T, H, D, cs.data(), sn.data(), w.data(), static_cast<float>(p.softmax_scale),
           static_cast<float>(p.head_scale), q8.data<std::uint8_t>(), qb.data<double>(), wo.data<float>(), wb.data<double>());
  Expected e;
  RefTensor a;
  a.name = "q_fp8";
  a.kind = CompareKind::bounded;
  a.value = q8;
  a.magnitude = qb;
  a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
  RefTensor b;
  b.name = "weights_out";
  b.kind = CompareKind::bounded;
  b.value = wo;
  b.magnitude = wb;
  b.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
  e.tensors.push_back(std::move(a));
  e.tensors.push_back(std::move(b));
  return e;
}

}  // namespace

Expected run_with(const Case& c, const Params& p, const RowLoops& loops) {
  if (p.vllm) return run_vllm(c, p, loops);
  Expected e;
  const Tensor* q = c.input_opt("q");
  Tensor rot;  // the quant's input when the path starts at q_pre: the dumped q_rot, else the reference's
  if (const Tensor* pre = c.input_opt("q_pre")) {
    const i64 T = pre->dim(0), H = pre->dim(1), D = pre->dim(2);
    const Tensor& cs = c.input("rope_cos");
    const Tensor& sn = c.input("rope_sin");
    const i64 Wc = cs.dim(-1), step = Wc == 64 ? 2 : 1;  // interleave-duplicated [T, 64] or [T, 32]
    std::vector<float> cv(static_cast<std::size_t>(T * 32)), sv(cv.size());  // each token's 32 cos / sin values
    for (i64 t = 0; t < T; ++t)
      for (i64 i = 0; i < 32; ++i) {
        cv[static_cast<std::size_t>(t * 32 + i)] = cs.data<float>()[t * Wc + i * step];
        sv[static_cast<std::size_t>(t * 32 + i)] = sn.data<float>()[t * Wc + i * step];
      }
    Tensor ref(DType::bf16, {T, H, D}, Tensor::Uninit{}), bnd(DType::f64, {T, H, D}, Tensor::Uninit{});
    loops.rotate(pre->data<std::uint16_t>(), T, H, D, cv.data(), sv.data(), ref.data<std::uint16_t>(), bnd.data<double>());
    RefTensor a;
    a.name = "q_rot";
    a.kind = CompareKind::bounded;
    a.value = ref;
    a.magnitude = bnd;
    a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
    e.tensors.push_back(std::move(a));
    auto it = c.outputs.find("q_rot");
    rot = it != c.outputs.end() && it->second.dtype() == DType::bf16 && it->second.numel() == ref.numel() ? it->second : ref;
    q = &rot;
  }
  // dynamic_quant_int8 of rows [R, D]: codes and fp16 scale bits.
  const auto& quant_rows = loops.quant;
  if (q) {
    const i64 T = q->dim(0), H = q->dim(1), D = q->dim(2);
    Tensor q8(DType::int8, {T, H, D}, Tensor::Uninit{}), qs(DType::fp16, {T, H}, Tensor::Uninit{});
    quant_rows(q->data<std::uint16_t>(), T * H, D, q8.data<std::int8_t>(), qs.data<std::uint16_t>());
    RefTensor a;
    a.name = "q_int8";
    a.value = q8;
    a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "q_scale";
    b.value = qs;
    b.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  if (const Tensor* w = c.input_opt("weights")) {
    const i64 H = w->dim(-1);
    Tensor w16(DType::fp16, w->shape(), Tensor::Uninit{});
    loops.weights(w->data<std::uint16_t>(), w->numel(), w16.data<std::uint16_t>());
    RefTensor a;
    a.name = "weights_fp16";
    a.value = w16;
    a.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
  }
  if (const Tensor* k = c.input_opt("k")) {
    const i64 R = k->dim(0), D = p.D, bs = p.bs;
    Tensor kc = c.input("k_cache_in").clone(), ksc = c.input("k_scale_cache_in").clone();
    std::vector<std::int8_t> codes(static_cast<std::size_t>(R * D));
    std::vector<std::uint16_t> sc(static_cast<std::size_t>(R));
    quant_rows(k->data<std::uint16_t>(), R, D, codes.data(), sc.data());
    for (i64 r = 0; r < R; ++r) {  // distinct slots (parse): order-free
      const i64 s = slot_of(c, p, r);
      if (s < 0) continue;
      std::copy(codes.begin() + r * D, codes.begin() + (r + 1) * D, kc.data<std::int8_t>() + s * D);
      ksc.data<std::uint16_t>()[s] = sc[static_cast<std::size_t>(r)];
    }
    RefTensor a;
    a.name = "k_cache";
    a.value = kc;
    a.describe = [bs, D](i64 f) { return "block " + std::to_string(f / (bs * D)) + " slot " + std::to_string(f / D % bs) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "k_scale_cache";
    b.value = ksc;
    b.describe = [bs](i64 f) { return "block " + std::to_string(f / bs) + " slot " + std::to_string(f % bs) + " scale"; };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer_prolog
