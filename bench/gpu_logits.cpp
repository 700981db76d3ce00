// GPU benchmark of the exact MQA-logits reference (CUDA backend, issue #16): the shapes of DeepGEMM's tests,
//   ragged S x N, H, D, causal prefill (row i sees keys [0, N - S + i + 1))
//   paged B requests x context L (a multiple of 64), next_n, H, D (page size 64, scattered block table)
// Prints the wall time of the whole CUDA reference (uploads, digit planes, kernel, downloads, host fallbacks), its
// device time and device memory (DSA_CUDA_STATS line of the engine), and checks bit-identity with the CPU reference
// on sampled row tiles (the full CPU reference of the ragged shape takes minutes). Run by scripts/gpu_bench.sh
// beside the torch peers (bench/torch_peer_gpu.py).
//   dsa_gpu_bench ragged S N H D | paged B L NEXT_N H D
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "bench/bench_cases.hpp"
#include "stage/stage.hpp"

using namespace dsa;
using bench::paged_case;
using bench::ragged_case;
using i64 = std::int64_t;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: dsa_gpu_bench ragged S N H D | paged B L NEXT_N H D\n");
    return 2;
  }
  if (const std::string why = cuda::device_problem(); !why.empty()) {
    std::printf("skipped: %s\n", why.c_str());
    return 0;
  }
  const std::string kind = argv[1];
  auto arg = [&](int i) { return static_cast<i64>(std::atoll(argv[i])); };
  Case c;
  i64 macs = 0, rows = 0, per = 1;
  if (kind == "ragged" && argc == 6) {
    const i64 S = arg(2), N = arg(3), H = arg(4), D = arg(5);
    c = ragged_case(S, N, H, D, true);
    for (i64 i = 0; i < S; ++i) macs += (N - S + i + 1) * H * D;
    rows = S;
  } else if (kind == "paged" && argc == 7) {
    const i64 B = arg(2), L = arg(3), NN = arg(4), H = arg(5), D = arg(6);
    c = paged_case(B, NN, L, H, D);
    for (i64 t = 0; t < NN; ++t) macs += B * (L - NN + t + 1) * H * D;
    rows = B * NN;
    per = NN;
  } else {
    std::fprintf(stderr, "usage: dsa_gpu_bench ragged S N H D | paged B L NEXT_N H D\n");
    return 2;
  }
  const auto probs = validate_case(c, false);
  if (!probs.empty()) {
    std::fprintf(stderr, "error: %s\n", probs.front().str().c_str());
    return 2;
  }
  setenv("DSA_CUDA_STATS", "1", 1);
  RefOptions o;
  run_reference(c, [] { RefOptions w; w.row_end = 1; return w; }(), Backend::cuda);  // warm-up: context, module load
  double best = 1e30;
  Expected e;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    e = run_reference(c, o, Backend::cuda);
    best = std::min(best, seconds_since(t0));
  }
  std::printf("%s: %.4g T q.k MAC, CUDA reference best of 3: %.1f ms wall (%.1f T MAC/s exact)\n", kind.c_str(),
              static_cast<double>(macs) * 1e-12, best * 1e3, static_cast<double>(macs) / best * 1e-12);
  // Bit-identity with the CPU on sampled row tiles (whole requests for paged).
  const RefTensor& full = e.tensors.at(0);
  const i64 cols = full.value.dim(1);
  int tiles = 0, same = 0;
  double cpu_s = 0;
  for (i64 r0 : {i64{0}, rows / 3 / per * per, rows - per}) {
    RefOptions t;
    t.row_begin = r0;
    t.row_end = r0 + per;
    const auto t0 = std::chrono::steady_clock::now();
    const Expected x = run_reference(c, t, Backend::cpu);
    cpu_s += seconds_since(t0);
    const RefTensor& a = x.tensors.at(0);
    ++tiles;
    same += a.value.same_bytes(full.value.slice0(r0, r0 + per)) && a.magnitude.same_bytes(full.magnitude.slice0(r0, r0 + per)) &&
            a.defined.same_bytes(full.defined.slice0(r0, r0 + per));
  }
  std::printf("CPU vs CUDA: %d of %d sampled row tile(s) byte-identical (value, M, defined; %lld cols each; CPU %.2f s)\n", same, tiles,
              static_cast<long long>(cols), cpu_s);
  return same == tiles ? 0 : 1;
}
