// indexer.logits_paged CPU reference: (request x key block) tiles in parallel through the exact core
// (engines/logits/logits_engine.hpp); the deepgemm-sm90 emulation row by row when the case's kernel asks for it.
#include <omp.h>

#include <algorithm>
#include <string>
#include <vector>

#include "layouts/indexer_kcache.hpp"
#include "profiles/deepgemm_sm90/logits_row.hpp"
#include "profiles/profiles.hpp"
#include "engines/logits/logits_engine.hpp"
#include "engines/logits/torch_logits.hpp"
#include "stages/indexer/logits_paged/stage.hpp"

namespace dsa::indexer::logits_paged {

using namespace engines::logits;

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) {
  const Tensor& q = c.input("q");
  const Tensor& cache = c.input("kv_cache");
  const Tensor& wt = c.input("weights");
  const Tensor& cl = c.input("context_lens");
  const Tensor& bt = c.input("block_table");
  const i64 B = q.dim(0), NN = q.dim(1), H = q.dim(2), D = q.dim(3);
  const i64 cols = p.max_context_len;
  const bool clean = p.clean_logits, bf16 = p.bf16;
  const layouts::IndexerKCacheView kvv = layouts::IndexerKCacheView::of(cache, p.order);
  const i64 ps = kvv.layout.page_size, MB = bt.dim(1), R = B * NN;
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const float* w = wt.data<float>();
  const std::int32_t* btp = bt.data<std::int32_t>();

  // Valid columns of row r = b*next_n + t: [0, n_r).
  std::vector<i64> nvalid(static_cast<sz>(R));
  for (i64 b = 0; b < B; ++b)
    for (i64 t = 0; t < NN; ++t)
      nvalid[static_cast<sz>(b * NN + t)] = valid_columns(cl.data<std::int32_t>(), cl.rank() == 2, b, t, NN, cols, MB * ps);
  auto page_of = [&](i64 b, i64 j) { return static_cast<i64>(btp[b * MB + j / ps]); };

  const i64 r0 = opt.row_begin, r1 = opt.rows_end(R);  // the row tile: whole requests (Stage::tiling aligns to next_n)
  LogitsTensors lt(r1 - r0, cols, bf16, clean);
  const LogitsOut out = lt.out();

  const WeightsF64 wf(wt);
  const Isa isa = pick_isa();
  const i64 kb = isa.amx ? 128 : 120;
  struct Task { i64 b, j0, j1; };
  std::vector<Task> tasks;
  for (i64 b = r0 / NN; b < (r1 + NN - 1) / NN; ++b) {
    i64 hi = 0;
    for (i64 t = 0; t < NN; ++t) hi = std::max(hi, nvalid[static_cast<sz>(b * NN + t)]);
    for (i64 j0 = 0; j0 < hi; j0 += kb) tasks.push_back({b, j0, std::min(hi, j0 + kb)});
  }
  const double* e4d = e4m3_f64_table();
  const int threads = opt.thread_count();
#pragma omp parallel num_threads(threads)
  {
    Tile tile;
    tile.shape(isa, static_cast<int>(kb), static_cast<int>(NN * H), static_cast<int>(D));
    std::vector<float> scl(static_cast<sz>(kb));
    std::vector<std::uint8_t> kbuf(static_cast<sz>(D));  // a key's codes where the layout scatters them
    std::vector<double> acc(static_cast<sz>(NN * tile.nka)), mg(static_cast<sz>(NN * tile.nka));
    std::vector<AmxRow> arows;
    i64 cur_b = -1;
#pragma omp for schedule(dynamic, 1)
    for (sz ti = 0; ti < tasks.size(); ++ti) {
      const Task& T = tasks[ti];
      if (T.b != cur_b) {
        tile.load_q(qc + T.b * NN * H * D, NN * H, e4d);
        cur_b = T.b;
      }
      for (i64 j = T.j0; j < T.j1; ++j) {
        std::copy_n(kvv.codes(page_of(T.b, j), j % ps, kbuf.data()), D, tile.key_row(static_cast<int>(j - T.j0)));
        scl[static_cast<sz>(j - T.j0)] = kvv.scale(page_of(T.b, j), j % ps);
      }
      const int nk = static_cast<int>(T.j1 - T.j0);
      if (H % 32 == 0 && tile.amx_keys(nk)) {  // AMX products straight into the head sums
        arows.clear();
        for (i64 t = 0; t < NN; ++t) {
          const i64 r = T.b * NN + t;
          const i64 jhi = std::min(T.j1, nvalid[static_cast<sz>(r)]);
          if (jhi <= T.j0 || r < r0 || r >= r1) continue;
          const sz x = static_cast<sz>(t) * static_cast<sz>(tile.nka);
          arows.push_back({static_cast<int>(t * H), 0, static_cast<int>(jhi - T.j0), wf.wd.data() + r * H, wf.wa.data() + r * H,
                           acc.data() + x, mg.data() + x});
        }
        amx_heads(tile.Kd.data(), Tile::a_keys(nk), tile.Qd.data(), tile.ncp, static_cast<int>(D), static_cast<int>(H),
                  arows.data(), static_cast<int>(arows.size()));
        for (const AmxRow& ar : arows) {
          const i64 r = T.b * NN + ar.c0 / H;
          finish_keys(ar.acc, ar.mag, ar.j1, w + r * H, static_cast<int>(H), static_cast<int>(D), scl.data(), qc + r * H * D,
                      tile.key_row(0), out, (r - r0) * cols + T.j0);
        }
        continue;
      }
      tile.compute(isa, nk, e4d);
      for (i64 t = 0; t < NN; ++t) {
        const i64 r = T.b * NN + t;
        const i64 jhi = std::min(T.j1, nvalid[static_cast<sz>(r)]);
        if (jhi <= T.j0 || r < r0 || r >= r1) continue;
        reduce_keys(isa, tile.c_at(0, static_cast<int>(t * H)), static_cast<sz>(tile.ncp), static_cast<int>(jhi - T.j0),
                    wf, w, static_cast<sz>(r * H), static_cast<int>(H), scl.data(), acc, mg, out, (r - r0) * cols + T.j0);
      }
    }
  }

  return assemble(c, p, opt, lt);
}

Expected assemble(const Case& c, const Params& p, const RefOptions& opt, const LogitsTensors& lt) {
  const Tensor& q = c.input("q");
  const Tensor& cache = c.input("kv_cache");
  const Tensor& cl = c.input("context_lens");
  const Tensor& bt = c.input("block_table");
  const float* w = c.input("weights").data<float>();
  const i64 B = q.dim(0), NN = q.dim(1), H = q.dim(2), D = q.dim(3);
  const i64 cols = p.max_context_len;
  const bool clean = p.clean_logits, bf16 = p.bf16;
  const layouts::IndexerKCacheView kvv = layouts::IndexerKCacheView::of(cache, p.order);
  const i64 ps = kvv.layout.page_size, MB = bt.dim(1), R = B * NN;
  const std::uint8_t* qc = q.data<std::uint8_t>();
  const std::int32_t* btp = bt.data<std::int32_t>();
  std::vector<i64> nvalid(static_cast<sz>(R));
  for (i64 b = 0; b < B; ++b)
    for (i64 t = 0; t < NN; ++t)
      nvalid[static_cast<sz>(b * NN + t)] = valid_columns(cl.data<std::int32_t>(), cl.rank() == 2, b, t, NN, cols, MB * ps);
  auto page_of = [&](i64 b, i64 j) { return static_cast<i64>(btp[b * MB + j / ps]); };
  const i64 r0 = opt.row_begin, r1 = opt.rows_end(R);
  const int threads = opt.thread_count();
  RefTensor rt = lt.ref(clean);
  rt.flat_offset = r0 * cols;
  if (opt.emulates(profiles::deepgemm_sm90()) && lt.emu.defined()) {  // computed by the backend (CUDA)
    rt.emulations[profiles::deepgemm_sm90().name] = lt.emu;
  } else if (opt.emulates(profiles::deepgemm_sm90())) {
    Tensor emu = lt.emulation();
#pragma omp parallel num_threads(threads)
    {
      profiles::sm90::EmuRow er(H, D);
      std::vector<std::int32_t> ksig(static_cast<sz>(D)), kexp(ksig.size());
      std::vector<std::uint8_t> kbuf(static_cast<sz>(D));
#pragma omp for schedule(dynamic, 1)
      for (i64 r = r0; r < r1; ++r) {
        const i64 b = r / NN;
        er.decode(qc + r * H * D);
        for (i64 j = 0; j < nvalid[static_cast<sz>(r)]; ++j) {
          const bool knan = profiles::sm90::decode_vec(kvv.codes(page_of(b, j), j % ps, kbuf.data()), static_cast<int>(D), ksig.data(), kexp.data());
          const float x = er.logit(ksig.data(), kexp.data(), knan, w + r * H, kvv.scale(page_of(b, j), j % ps));
          store_bits(emu, (r - r0) * cols + j, emu_bits(x, bf16));
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
      TorchLogitRow tr(H, D, torch_core::Form::paged_fp32, bf16);
      std::vector<std::uint8_t> kbuf(static_cast<sz>(D));
#pragma omp for schedule(dynamic, 1)
      for (i64 r = r0; r < r1; ++r) {
        const i64 b = r / NN;
        tr.set_query(qc + r * H * D, w + r * H);
        for (i64 j = 0; j < nvalid[static_cast<sz>(r)]; ++j) {
          const TorchLogit t = tr.logit(kvv.codes(page_of(b, j), j % ps, kbuf.data()), kvv.scale(page_of(b, j), j % ps));
          store_bits(emu, (r - r0) * cols + j, t.emu_bits);
          bd[(r - r0) * cols + j] = t.bound;
        }
      }
    }
    rt.magnitude = bound;
    if (opt.emulates(profiles::vllm_torch())) rt.emulations[profiles::vllm_torch().name] = emu;
  }

  const Tensor btc = bt;  // shares storage
  rt.describe = [cols, NN, ps, MB, btc](i64 f) {
    const i64 r = f / cols, j = f % cols, b = r / NN, t = r % NN;
    std::string s = "batch " + std::to_string(b) + " next_n " + std::to_string(t) + " key " + std::to_string(j);
    if (j / ps < MB)
      s += " (page " + std::to_string(btc.data<std::int32_t>()[b * MB + j / ps]) + " slot " + std::to_string(j % ps) + ")";
    return s;
  };
  Expected e;
  e.tensors.push_back(std::move(rt));
  return e;
}

}  // namespace dsa::indexer::logits_paged
