// The row chunks of a per-candidate score kernel (indexer.npu_lightning, v4.indexer on the GPU): T rows x C candidate
// positions of f64 scores and bounds, computed in chunks of at most 65535 rows (grid y) and ~256 MiB of device
// output, each downloaded into the host's [T, C] buffers. launch(grid, row0, rows, sc, bd) starts the chunk's kernel
// (one thread per (row, position), 128 per block) writing sc / bd [rows, C]. DevicePagedRows: the device copies of a
// job's shared inputs (ascend_li::core::PagedRows). Device code only (include from .cu).
#pragma once
#include <algorithm>
#include <cstdint>

#include "backend/cuda.hpp"
#include "engines/ascend_li/ascend_li_core.hpp"

namespace dsa::engines::ascend_li {

constexpr int kScoreThreads = 128;

// The weights, block table and row arrays of a PagedRows job on the device; bind() points a copy of the job at them.
struct DevicePagedRows {
  cuda::Buffer w, bt, rb, rn;
  explicit DevicePagedRows(const ascend_li::core::PagedRows& h)
      : w(static_cast<std::size_t>(h.T * h.H) * 8), bt(static_cast<std::size_t>(h.B * h.maxblk) * 4),
        rb(static_cast<std::size_t>(h.T) * 8), rn(static_cast<std::size_t>(h.T) * 8) {
    if (h.T * h.H > 0) w.upload(h.weights, static_cast<std::size_t>(h.T * h.H) * 8);
    if (h.B * h.maxblk > 0) bt.upload(h.block_table, static_cast<std::size_t>(h.B * h.maxblk) * 4);
    if (h.T > 0) rb.upload(h.row_b, static_cast<std::size_t>(h.T) * 8), rn.upload(h.row_nvis, static_cast<std::size_t>(h.T) * 8);
  }
  void bind(ascend_li::core::PagedRows& d) const {
    d.weights = static_cast<const double*>(w.get());
    d.block_table = static_cast<const std::int32_t*>(bt.get());
    d.row_b = static_cast<const std::int64_t*>(rb.get());
    d.row_nvis = static_cast<const std::int64_t*>(rn.get());
  }
};

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

}  // namespace dsa::engines::ascend_li
