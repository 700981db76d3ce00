// The sparse attention row engine on the GPU (sparse_attn_cuda.cu): the same per-element operations in the same
// order as RowEngine (sparse_attn.hpp) -- every score an fma chain over d in increasing order, every P·V and P·|V|
// sum an fma chain over the row's keys in order, L summed in key order, the per-head steps of sparse_attn_core.hpp --
// so every RowView it hands out has the CPU engine's bits (dsa-check backend-diff). Callable from C++20 code (no CUDA
// headers); a CUDA failure is a std::runtime_error naming the call.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engines/sparse_attn/sparse_attn_core.hpp"

namespace dsa::attn {

struct DeviceRows {
  std::int64_t R = 0, H = 0, D = 0, dv = 0;  // rows, heads, key dims, value dims (the first dv dims of a key)
  const std::uint16_t* q = nullptr;          // [R, H, D] bf16 bits
  const void* keys = nullptr;                // [nkeys, D]: bf16 bits, or f32 values when keys_f32
  bool keys_f32 = false;
  std::int64_t nkeys = 0;
  const std::int64_t* row_ptr = nullptr;  // [R + 1]: row r's keys are ids[row_ptr[r] .. row_ptr[r + 1]) in order
  const std::int64_t* ids = nullptr;      // key ids in [0, nkeys)
  double sm = 0;                          // softmax scale (z = sm * s)
  bool vabs = false;                      // also sum_t |k_t[d]| per row (RowView::vabs)
};

// Runs every row on the device in chunks of rows whose scores and outputs fit a fixed device budget; after each
// chunk, fn(r0, r1, views) on the host, views[r - r0] being row r's results (valid during the call only).
void run_rows_cuda(const DeviceRows& in, const std::function<void(std::int64_t, std::int64_t, const std::vector<RowView>&)>& fn);

}  // namespace dsa::attn
