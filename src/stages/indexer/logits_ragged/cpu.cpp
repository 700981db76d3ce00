// indexer.logits_ragged CPU reference: (row block x key block) tiles in parallel through the exact core
// (engines/logits/logits_engine.hpp); the deepgemm-sm90 emulation row by row when the case's kernel asks for it.
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "profiles/deepgemm_sm90/logits_row.hpp"
#include "profiles/profiles.hpp"
#include "engines/logits/logits_engine.hpp"
#include "engines/logits/torch_logits.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"

namespace dsa::indexer::logits_ragged {

using namespace engines::logits;

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const Tensor& kvs = c.input("kv_scale");
  const Tensor& wt = c.input("weights");
  const std::int32_t* ks = c.input("ks").data<std::int32_t>();
  const std::int32_t* ke = c.input("ke").data<std::int32_t>();
  const i64 S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0);
  const bool clean = p.clean_logits, bf16 = p.bf16;
  const i64 msk = p.max_seqlen_k;
  const Rows rows{ks, ke, N, msk};
  const i64 cols = rows.cols();
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const std::uint8_t* kc = kv.data<std::uint8_t>();
  const float* sc = kvs.data<float>();
  const float* w = wt.data<float>();

  const bool all_defined = clean && msk == 0;
  const i64 r0 = opt.row_begin, r1 = opt.rows_end(S);  // the row tile (all rows unless check streams the output)
  LogitsTensors lt(r1 - r0, cols, bf16, all_defined);
  const LogitsOut out = lt.out();

  auto row_lo = [&rows](i64 i) { return rows.lo(i); };
  auto row_hi = [&rows](i64 i) { return rows.hi(i); };
  auto col_of = [&rows](i64 i, i64 j) { return rows.col(i, j); };

  const WeightsF64 wf(wt);
  const Isa isa = pick_isa();
  const i64 rb = std::max<i64>(1, 256 / std::max<i64>(H, 1));  // q rows per tile (rb * H columns)
  const i64 kb = isa.amx ? 128 : 120;                            // keys per tile (AMX: 32-key blocks)
  struct Task { i64 i0, i1, j0, j1; };
  std::vector<Task> tasks;
  for (i64 i0 = r0; i0 < r1; i0 += rb) {
    const i64 i1 = std::min(r1, i0 + rb);
    i64 lo = N, hi = 0;
    for (i64 i = i0; i < i1; ++i)
      if (row_hi(i) > row_lo(i)) lo = std::min(lo, row_lo(i)), hi = std::max(hi, row_hi(i));
    for (i64 j0 = lo; j0 < hi; j0 += kb) tasks.push_back({i0, i1, j0, std::min(hi, j0 + kb)});
  }
  const double* e4d = e4m3_f64_table();
  const int threads = opt.thread_count();
#pragma omp parallel num_threads(threads)
  {
    Tile tile;
    tile.shape(isa, static_cast<int>(kb), static_cast<int>(rb * H), static_cast<int>(D));
    std::vector<double> acc(static_cast<sz>(rb * tile.nka)), mg(static_cast<sz>(rb * tile.nka));
    std::vector<AmxRow> arows;
    i64 cur_i0 = -1;
#pragma omp for schedule(dynamic, 1)
    for (sz t = 0; t < tasks.size(); ++t) {
      const Task& T = tasks[t];
      if (T.i0 != cur_i0) {  // tasks of one row block are consecutive: pack Q once per block and thread
        tile.load_q(qc + T.i0 * H * D, (T.i1 - T.i0) * H, e4d);
        cur_i0 = T.i0;
      }
      const int nk = static_cast<int>(T.j1 - T.j0);
      std::copy_n(kc + T.j0 * D, nk * D, tile.key_row(0));
      if (H % 32 == 0 && tile.amx_keys(nk)) {  // AMX products straight into the head sums
        arows.clear();
        for (i64 i = T.i0; i < T.i1; ++i) {
          const i64 jlo = std::max(T.j0, row_lo(i)), jhi = std::min(T.j1, row_hi(i));
          if (jhi <= jlo) continue;
          const sz x = static_cast<sz>(i - T.i0) * static_cast<sz>(tile.nka);
          arows.push_back({static_cast<int>((i - T.i0) * H), static_cast<int>(jlo - T.j0), static_cast<int>(jhi - T.j0),
                           wf.wd.data() + i * H, wf.wa.data() + i * H, acc.data() + x, mg.data() + x});
        }
        amx_heads(tile.Kd.data(), Tile::a_keys(nk), tile.Qd.data(), tile.ncp, static_cast<int>(D), static_cast<int>(H),
                  arows.data(), static_cast<int>(arows.size()));
        for (const AmxRow& R : arows) {
          const i64 i = T.i0 + R.c0 / H, jlo = T.j0 + R.j0;
          finish_keys(R.acc + R.j0, R.mag + R.j0, R.j1 - R.j0, w + i * H, static_cast<int>(H), static_cast<int>(D), sc + jlo,
                      qc + i * H * D, tile.key_row(R.j0), out, (i - r0) * cols + col_of(i, jlo));
        }
        continue;
      }
      tile.compute(isa, nk, e4d);
      for (i64 i = T.i0; i < T.i1; ++i) {
        const i64 jlo = std::max(T.j0, row_lo(i)), jhi = std::min(T.j1, row_hi(i));
        if (jhi <= jlo) continue;
        reduce_keys(isa, tile.c_at(static_cast<int>(jlo - T.j0), static_cast<int>((i - T.i0) * H)),
                    static_cast<sz>(tile.ncp), static_cast<int>(jhi - jlo), wf, w, static_cast<sz>(i * H),
                    static_cast<int>(H), sc + jlo, acc, mg, out, (i - r0) * cols + col_of(i, jlo));
      }
    }
  }

  return assemble(c, p, opt, lt);
}

Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const LogitsTensors& lt) {
  const Tensor& q = c.input("q");
  const Tensor& kv = c.input("kv");
  const float* sc = c.input("kv_scale").data<float>();
  const float* w = c.input("weights").data<float>();
  const std::int32_t* ks = c.input("ks").data<std::int32_t>();
  const std::int32_t* ke = c.input("ke").data<std::int32_t>();
  const i64 S = q.dim(0), H = q.dim(1), D = q.dim(2), N = kv.dim(0);
  const bool bf16 = p.bf16, all_defined = p.clean_logits && p.max_seqlen_k == 0;
  const i64 msk = p.max_seqlen_k;
  const Rows rows{ks, ke, N, msk};
  const i64 cols = rows.cols();
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const std::uint8_t* kc = kv.data<std::uint8_t>();
  const i64 r0 = opt.row_begin, r1 = opt.rows_end(S);
  auto row_lo = [&rows](i64 i) { return rows.lo(i); };
  auto row_hi = [&rows](i64 i) { return rows.hi(i); };
  auto col_of = [&rows](i64 i, i64 j) { return rows.col(i, j); };
  const int threads = opt.thread_count();
  RefTensor rt = lt.ref(all_defined);
  rt.flat_offset = r0 * cols;

  if (opt.emulates(profiles::deepgemm_sm90()) && lt.emu.defined()) {  // computed by the backend (CUDA)
    rt.emulations[profiles::deepgemm_sm90().name] = lt.emu;
  } else if (opt.emulates(profiles::deepgemm_sm90())) {
    Tensor emu = lt.emulation();
    std::vector<std::int32_t> ksig(static_cast<sz>(N * D)), kexp(ksig.size());
    std::vector<std::uint8_t> knan(static_cast<sz>(N));
    for (i64 j = 0; j < N; ++j)
      knan[static_cast<sz>(j)] = profiles::sm90::decode_vec(kc + j * D, static_cast<int>(D), ksig.data() + j * D, kexp.data() + j * D);
#pragma omp parallel num_threads(threads)
    {
      profiles::sm90::EmuRow er(H, D);
#pragma omp for schedule(dynamic, 1)
      for (i64 i = r0; i < r1; ++i) {
        er.decode(qc + i * H * D);
        for (i64 j = row_lo(i); j < row_hi(i); ++j) {
          const float x = er.logit(ksig.data() + j * D, kexp.data() + j * D, knan[static_cast<sz>(j)] != 0, w + i * H, sc[j]);
          store_bits(emu, (i - r0) * cols + col_of(i, j), emu_bits(x, bf16));
        }
      }
    }
    rt.emulations[profiles::deepgemm_sm90().name] = emu;
  }

  if (p.torch) {  // vllm-torch: its derived bound replaces M (policy derived-bound), its fixed-order emulation
    Tensor bound(DType::f64, lt.mag.shape());
    Tensor emu = lt.emulation();
    double* bd = bound.data<double>();
#pragma omp parallel num_threads(threads)
    {
      TorchLogitRow tr(H, D, torch_core::Form::ragged_bf16, bf16);
#pragma omp for schedule(dynamic, 1)
      for (i64 i = r0; i < r1; ++i) {
        tr.set_query(qc + i * H * D, w + i * H);
        for (i64 j = row_lo(i); j < row_hi(i); ++j) {
          const TorchLogit t = tr.logit(kc + j * D, sc[j]);
          const i64 f = (i - r0) * cols + col_of(i, j);
          store_bits(emu, f, t.emu_bits);
          bd[f] = t.bound;
        }
      }
    }
    rt.magnitude = bound;
    if (opt.emulates(profiles::vllm_torch())) rt.emulations[profiles::vllm_torch().name] = emu;
  }

  std::vector<std::int32_t> ksv(ks, ks + S);
  rt.describe = [cols, msk, ksv](i64 f) {
    const i64 i = f / cols, t = f % cols;
    if (msk > 0)
      return "row " + std::to_string(i) + " col " + std::to_string(t) + " (key " + std::to_string(ksv[static_cast<sz>(i)] + t) + ")";
    return "row " + std::to_string(i) + " key " + std::to_string(t);
  };
  Expected e;
  e.tensors.push_back(std::move(rt));
  return e;
}

}  // namespace dsa::indexer::logits_ragged
