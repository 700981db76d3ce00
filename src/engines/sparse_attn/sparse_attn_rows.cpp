#include "engines/sparse_attn/sparse_attn_rows.hpp"

#include <omp.h>

#include <cmath>
#include <memory>
#include <stdexcept>

#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"
#ifdef DSA_CUDA_BACKEND
#include "backend/cuda_stats.hpp"
#include "engines/sparse_attn/sparse_attn_cuda.hpp"
#endif

namespace dsa::attn {

namespace {

void run_cpu(const RowSource& src, int threads, const std::function<void(std::int64_t, const RowView&)>& write) {
  const std::int64_t H = src.H, D = src.D;
#pragma omp parallel num_threads(threads)
  {
    RowEngine e;
    std::vector<std::int64_t> ids;
    std::vector<double> vabs;
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t r = 0; r < src.R; ++r) {
      ids.clear();
      src.ids(r, ids);
      const auto n = static_cast<std::int64_t>(ids.size());
      e.reset(H, D, src.dv, n);
      for (std::int64_t h = 0; h < H; ++h) num::bf16_to_f64_n(src.q + (r * H + h) * D, D, e.q(h));
      vabs.assign(src.vabs ? static_cast<std::size_t>(D) : 0, 0.0);
      for (std::int64_t j = 0; j < n; ++j) {
        double* k = e.key(j);
        src.key(ids[static_cast<std::size_t>(j)], k);
        if (src.vabs) num::add_abs_n(k, D, vabs.data());
      }
      e.run(src.sm);
      RowView v = e.view();
      v.vabs = src.vabs ? vabs.data() : nullptr;
      write(r, v);
    }
  }
}

#ifdef DSA_CUDA_BACKEND
void run_cuda(const RowSource& src, int threads, const std::function<void(std::int64_t, const RowView&)>& write) {
  cuda::PhaseClock clk("sparse attention host");
  std::vector<std::int64_t> ptr(static_cast<std::size_t>(src.R + 1), 0), ids, row;
  for (std::int64_t r = 0; r < src.R; ++r) {
    row.clear();
    src.ids(r, row);
    ids.insert(ids.end(), row.begin(), row.end());
    ptr[static_cast<std::size_t>(r + 1)] = static_cast<std::int64_t>(ids.size());
  }
  clk.mark("row ids");
  DeviceRows d;
  d.R = src.R, d.H = src.H, d.D = src.D, d.dv = src.dv;
  d.q = src.q;
  std::unique_ptr<float[]> table;  // not zeroed: every element is written below, first touched by its thread
  std::unique_ptr<std::uint16_t[]> table16;
  if (src.bf16_table) {
    d.keys = src.bf16_table, d.nkeys = src.id_space;
  } else {  // the keys the rows read, in order of first use
    std::vector<std::int64_t> used, slot(static_cast<std::size_t>(src.id_space), -1);
    for (std::int64_t& id : ids) {
      std::int64_t& k = slot[static_cast<std::size_t>(id)];
      if (k < 0) k = static_cast<std::int64_t>(used.size()), used.push_back(id);
      id = k;
    }
    const std::int64_t n = static_cast<std::int64_t>(used.size()), D = src.D;
    const std::size_t cells = static_cast<std::size_t>(std::max<std::int64_t>(n * D, 1));
    if (src.keys_bf16) table16.reset(new std::uint16_t[cells]);
    else table.reset(new float[cells]);
#pragma omp parallel num_threads(threads)
    {
      std::vector<double> k(static_cast<std::size_t>(D));
#pragma omp for schedule(static)
      for (std::int64_t j = 0; j < n; ++j) {
        src.key(used[static_cast<std::size_t>(j)], k.data());
        if (src.keys_bf16)  // exact: the stage promises bf16 values (NaN stays NaN)
          for (std::int64_t x = 0; x < D; ++x) table16[static_cast<std::size_t>(j * D + x)] = num::f64_to_bf16(k[static_cast<std::size_t>(x)]);
        else
          for (std::int64_t x = 0; x < D; ++x) table[static_cast<std::size_t>(j * D + x)] = static_cast<float>(k[static_cast<std::size_t>(x)]);
      }
    }
    if (src.keys_bf16) d.keys = table16.get(), d.keys_f32 = false;
    else d.keys = table.get(), d.keys_f32 = true;
    d.nkeys = n;
  }
  d.row_ptr = ptr.data();
  d.ids = ids.data();
  d.sm = src.sm;
  d.vabs = src.vabs;
  clk.mark("key table");
  clk.print(std::to_string(src.R) + " rows");
  run_rows_cuda(d, [&](std::int64_t r0, std::int64_t r1, const std::vector<RowView>& views) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t r = r0; r < r1; ++r) write(r, views[static_cast<std::size_t>(r - r0)]);
  });
}
#endif

}  // namespace

void run_rows(const RowSource& src, Backend backend, int threads, const std::function<void(std::int64_t, const RowView&)>& write) {
  if (backend == Backend::cpu) return run_cpu(src, threads, write);
#ifdef DSA_CUDA_BACKEND
  if (backend == Backend::cuda) return run_cuda(src, threads, write);
#endif
  throw std::logic_error("sparse attention rows: no such backend in this build");
}

}  // namespace dsa::attn
