// Throughput of the sparse MLA decode reference (attn.sparse_mla_decode) at the V3.2 serving shape of the README:
// b = 64, s_q = 2, h_q = 128, topk = 2048, d_qk = 576, d_v = 512, inputs from the golden generator of the
// uncommitted catalogue case mla_decode_v32_full. Effective rate = the QK and PV multiply-adds
// (b * s_q * h_q * topk * (576 + 512)) per second of wall time; the reference also computes the error-bound
// magnitudes (another P|V| product, +47 % work) and the softmax. Run by scripts/bench.sh next to
// bench/numpy_peer_attn.py (the same QK, softmax and PV in numpy fp64).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>

#include "pipeline/catalogue.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {

int bench_threads() {
  const char* e = std::getenv("DSA_BENCH_THREADS");
  return e ? std::atoi(e) : 2;
}

// The inputs of a catalogue case, built by its stage's generator (no reference run).
Case catalogue_inputs(const char* name) {
  const golden::GoldenSpec* spec = golden::find_spec(name);
  const Stage* st = find_stage(spec->stage);
  Case c;
  c.name = spec->name;
  c.stage = spec->stage;
  c.attrs = spec->attrs;
  for (const auto& g : st->generators)
    if (g.name == spec->generator) g.fn(*spec, spec->seed, bench_threads(), c);
  apply_attr_defaults(c);
  return c;
}

// Times the whole CPU reference of a catalogue case (inputs generated once, outside the timing); returns the case.
Case time_reference(benchmark::State& state, const char* name) {
  Case c = catalogue_inputs(name);
  BoundCase b;
  if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
  RefOptions o;
  o.threads = bench_threads();
  for (auto _ : state) benchmark::DoNotOptimize(run_reference(b, o));
  return c;
}

// The counters every benchmark here reports: multiply-adds per second and the process's peak RSS.
void report(benchmark::State& state, double macs) {
  state.counters["G_MAC_per_s"] = benchmark::Counter(macs * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_RSS_MiB"] = static_cast<double>(u.ru_maxrss) / 1024.0;
}

void BM_sparse_mla_decode(benchmark::State& state) {
  const Case c = time_reference(state, "mla_decode_v32_full");
  const Tensor& q = c.input("q");
  const double macs = static_cast<double>(q.dim(0) * q.dim(1) * q.dim(2)) * static_cast<double>(c.input("indices").dim(2)) * (576 + 512);
  report(state, macs);
}
BENCHMARK(BM_sparse_mla_decode)->Unit(benchmark::kSecond)->Iterations(2)->UseRealTime();

// v4.compressor: a 32K-token prefill of one V4-Flash C4 layer (catalogue case v4c4_prefill_32k: D 512, H 4096,
// r 4, coff 2). Rate = the two projection GEMMs' multiply-adds (T * 2 * coff * D * H) per wall second of the whole
// step (projections, state rows, 8192 pooled entries with their bounds).
void BM_v4_compressor_prefill_32k(benchmark::State& state) {
  const Case c = time_reference(state, "v4c4_prefill_32k");
  const Tensor& x = c.input("x");
  const double macs = static_cast<double>(x.dim(0)) * static_cast<double>(c.input("wkv").dim(0)) * 2.0 * static_cast<double>(x.dim(1));
  report(state, macs);
}
BENCHMARK(BM_v4_compressor_prefill_32k)->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();

// attn.v4_sparse: the V4-Flash decode batch of the catalogue case v4sa_c4_flash_full (32 requests x MTP 2, contexts
// 128..8192, 64 heads, D 512, window 128, C4 top-k 512, sink). Rate = QK + PV multiply-adds (keys x N x 2 D summed over
// the rows; a row's keys: its window positions and its compressed entries up to the first -1, README of the stage)
// per wall second of the whole reference. Peer: bench/numpy_peer_v4_attn.py.
void BM_v4_sparse_attn_decode(benchmark::State& state) {
  const Case c = time_reference(state, "v4sa_c4_flash_full");
  const Tensor& q = c.input("q");
  const Tensor& cu = c.input("cu_seqlens_q");
  const Tensor& kvl = c.input("seqused_kv");
  const Tensor& idx = c.input("cmp_sparse_indices");
  const std::int64_t N = q.dim(1), D = q.dim(2), K = idx.dim(2), B = kvl.dim(0), ratio = c.attr_int("cmp_ratio");
  const std::int64_t wl = c.attr_int("ori_win_left");  // the window's right side is 0 (ori_win_right)
  double keys = 0;
  for (std::int64_t r = 0; r < B; ++r) {
    const std::int64_t q0 = cu.int_at(r), ql = cu.int_at(r + 1) - q0, kl = kvl.int_at(r);
    for (std::int64_t i = 0; i < ql; ++i) {
      const std::int64_t p = kl - ql + i, row = q0 + i;
      std::int64_t n = std::min(p, wl) + 1, cols = std::min(K, (p + 1) / ratio), j = 0;
      while (j < cols && idx.int_at(row * K + j) >= 0) ++j;
      keys += static_cast<double>(n + j);
    }
  }
  report(state, keys * static_cast<double>(N) * 2.0 * static_cast<double>(D));
  state.counters["keys_per_row"] = keys / static_cast<double>(q.dim(0));
}
BENCHMARK(BM_v4_sparse_attn_decode)->Unit(benchmark::kMillisecond)->Iterations(10)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
