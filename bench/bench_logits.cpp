// Throughput of the exact MQA-logits references (ragged prefill, paged decode) and the machine's fp64 FMA peak.
// Effective rate = q.k multiply-adds (S * N * H * D, or B * next_n * ctx * H * D) per second of wall time;
// peak RSS from getrusage. Run by scripts/bench.sh next to the numpy peer (bench/numpy_peer.py).
#include <benchmark/benchmark.h>
#include <omp.h>
#include <sys/resource.h>

#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench/bench_cases.hpp"
#include "stage/stage.hpp"

using namespace dsa;
using bench::paged_case;
using bench::ragged_case;
using i64 = std::int64_t;

namespace {
int bench_threads() {
  const char* e = std::getenv("DSA_BENCH_THREADS");
  return e ? std::atoi(e) : 2;
}
double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}
void run_stage(benchmark::State& state, const Case& c, double macs) {
  RefOptions o;
  o.threads = bench_threads();
  BoundCase b;  // validated and parsed once, outside the timed loop
  if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
  for (auto _ : state) {
    Expected e = run_reference(b, o);
    benchmark::DoNotOptimize(e.tensors[0].value.raw());
  }
  state.counters["MAC/s"] = benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_RSS_MiB"] = peak_rss_mib();
  state.counters["threads"] = o.threads;
}

void BM_logits_ragged(benchmark::State& state) {
  const i64 S = state.range(0), N = state.range(1), H = 64, D = 128;
  const Case c = ragged_case(S, N, H, D);
  run_stage(state, c, static_cast<double>(S) * static_cast<double>(N) * H * D);
}
BENCHMARK(BM_logits_ragged)->Args({4096, 4096})->Unit(benchmark::kSecond)->Iterations(2)->UseRealTime();

void BM_logits_paged_decode(benchmark::State& state) {
  const i64 B = 64, NN = 2, ctx = state.range(0), H = 64, D = 128;
  const Case c = paged_case(B, NN, ctx, H, D);
  run_stage(state, c, static_cast<double>(B * NN) * static_cast<double>(ctx) * H * D);
}
BENCHMARK(BM_logits_paged_decode)->Arg(32768)->Unit(benchmark::kSecond)->Iterations(2)->UseRealTime();

#if defined(__x86_64__)
// fp64 FMA peak: 16 independent 512-bit (or 256-bit) FMA chains per thread.
__attribute__((target("avx512f,fma"))) double fma_loop_avx512(i64 iters) {
  __m512d a[16];
  const __m512d x = _mm512_set1_pd(1.0000001), y = _mm512_set1_pd(0.9999999);
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_pd(static_cast<double>(i));
  for (i64 n = 0; n < iters; ++n)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_pd(a[i], x, y);
  double s = 0;
  for (int i = 0; i < 16; ++i) s += _mm512_reduce_add_pd(a[i]);
  return s;
}
__attribute__((target("avx2,fma"))) double fma_loop_avx2(i64 iters) {
  __m256d a[12];
  const __m256d x = _mm256_set1_pd(1.0000001), y = _mm256_set1_pd(0.9999999);
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_pd(static_cast<double>(i));
  for (i64 n = 0; n < iters; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_pd(a[i], x, y);
  double s = 0;
  alignas(32) double t[4];
  for (int i = 0; i < 12; ++i) {
    _mm256_store_pd(t, a[i]);
    s += t[0] + t[1] + t[2] + t[3];
  }
  return s;
}
void BM_fp64_fma_peak(benchmark::State& state) {
  const bool avx512 = state.range(0) == 1 && __builtin_cpu_supports("avx512f");
  const int th = bench_threads();
  const i64 iters = 20'000'000;
  for (auto _ : state) {
    double sink = 0;
#pragma omp parallel num_threads(th) reduction(+ : sink)
    sink += avx512 ? fma_loop_avx512(iters) : fma_loop_avx2(iters);
    benchmark::DoNotOptimize(sink);
  }
  const double per = avx512 ? 16.0 * 8 : 12.0 * 4;
  state.counters["FMA/s"] = benchmark::Counter(per * static_cast<double>(iters) * th, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = th;
  state.SetLabel(avx512 ? "avx512" : "avx2");
}
BENCHMARK(BM_fp64_fma_peak)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3)->UseRealTime();
#endif

}  // namespace

BENCHMARK_MAIN();
