// The row chunks of a per-candidate score kernel (indexer.npu_lightning, v4.indexer on the GPU): T rows x C candidate
// positions of f64 scores and bounds, computed in chunks of at most 65535 rows (grid y) and ~256 MiB of device
// output, each downloaded into the host's [T, C] buffers. launch(grid, row0, rows, sc, bd) starts the chunk's kernel
// (one thread per (row, position), 128 per block) writing sc / bd [rows, C]. Device code only (include from .cu).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cuda.hpp"

namespace dsa::indexer {

constexpr int kScoreThreads = 128;

template <class Launch>
void score_rows_chunked(std::int64_t T, std::int64_t C, double* scores, double* bounds, const char* what, Launch launch) {
  using i64 = std::int64_t;
  if (T <= 0 || C <= 0) return;
  const i64 chunk = std::max<i64>(1, std::min<i64>({T, 65535, (i64{256} << 20) / (C * 16)}));
  cuda::Buffer dsc(static_cast<std::size_t>(chunk * C) * 8), dbd(static_cast<std::size_t>(chunk * C) * 8);
  double* sc = static_cast<double*>(dsc.get());
  double* bd = static_cast<double*>(dbd.get());
  for (i64 row0 = 0; row0 < T; row0 += chunk) {
    const i64 rows = std::min(chunk, T - row0);
    const dim3 grid(static_cast<unsigned>((C + kScoreThreads - 1) / kScoreThreads), static_cast<unsigned>(rows));
    launch(grid, row0, rows, sc, bd);
    cuda::check_last(what);
    dsc.download(scores + row0 * C, static_cast<std::size_t>(rows * C) * 8);
    dbd.download(bounds + row0 * C, static_cast<std::size_t>(rows * C) * 8);
  }
}

}  // namespace dsa::indexer
