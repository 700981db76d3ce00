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

#include "stage/stage.hpp"

using namespace dsa;
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
void fill_codes(Tensor& t, std::mt19937_64& g) {
  for (auto& c : t.span<std::uint8_t>()) {
    c = static_cast<std::uint8_t>(g() & 0xFF);
    if ((c & 0x7F) == 0x7F) c = 0x38;
  }
}
void fill_f32(Tensor& t, std::mt19937_64& g, float lo, float span) {
  for (auto& x : t.span<float>()) x = lo + span * static_cast<float>(g() % 65536) / 65536.0f;
}

Case ragged_case(i64 S, i64 N, i64 H, i64 D) {
  std::mt19937_64 g(42);
  Case c;
  c.name = "bench";
  c.stage = "indexer.logits_ragged";
  c.inputs["q"] = Tensor(DType::fp8_e4m3fn, {S, H, D});
  c.inputs["kv"] = Tensor(DType::fp8_e4m3fn, {N, D});
  c.inputs["kv_scale"] = Tensor(DType::f32, {N});
  c.inputs["weights"] = Tensor(DType::f32, {S, H});
  fill_codes(c.inputs["q"], g);
  fill_codes(c.inputs["kv"], g);
  fill_f32(c.inputs["kv_scale"], g, 0.001f, 0.01f);
  fill_f32(c.inputs["weights"], g, -1.0f, 2.0f);
  std::vector<std::int32_t> ks(static_cast<std::size_t>(S), 0), ke(static_cast<std::size_t>(S), static_cast<std::int32_t>(N));
  c.inputs["ks"] = Tensor::from_vector(DType::i32, {S}, ks);
  c.inputs["ke"] = Tensor::from_vector(DType::i32, {S}, ke);
  apply_attr_defaults(c);
  return c;
}

Case paged_case(i64 B, i64 NN, i64 ctx, i64 H, i64 D) {
  std::mt19937_64 g(43);
  const i64 ps = 64, MB = ctx / ps, P = B * MB;
  Case c;
  c.name = "bench";
  c.stage = "indexer.logits_paged";
  c.inputs["q"] = Tensor(DType::fp8_e4m3fn, {B, NN, H, D});
  fill_codes(c.inputs["q"], g);
  Tensor cache(DType::u8, {P, ps, 1, D + 4});
  for (i64 p = 0; p < P; ++p) {
    std::uint8_t* base = cache.data<std::uint8_t>() + p * ps * (D + 4);
    for (i64 i = 0; i < ps * D; ++i) {
      auto v = static_cast<std::uint8_t>(g() & 0xFF);
      base[i] = (v & 0x7F) == 0x7F ? 0x38 : v;
    }
    for (i64 t = 0; t < ps; ++t) {
      const float s = 0.001f + static_cast<float>(g() % 1024) / 65536.0f;
      std::memcpy(base + ps * D + 4 * t, &s, 4);
    }
  }
  c.inputs["kv_cache"] = cache;
  c.inputs["weights"] = Tensor(DType::f32, {B * NN, H});
  fill_f32(c.inputs["weights"], g, -1.0f, 2.0f);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(P));
  for (i64 i = 0; i < P; ++i) pages[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % P);  // scattered
  c.inputs["block_table"] = Tensor::from_vector(DType::i32, {B, MB}, pages);
  c.inputs["context_lens"] = Tensor::from_vector(DType::i32, {B}, std::vector<std::int32_t>(static_cast<std::size_t>(B), static_cast<std::int32_t>(ctx)));
  c.attrs["max_context_len"] = ctx;
  apply_attr_defaults(c);
  return c;
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
