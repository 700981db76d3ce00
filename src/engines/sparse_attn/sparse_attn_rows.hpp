// The row loop of the sparse attention stages on either backend: a stage describes its rows (query, the key ids of
// each row in the reference order, the keys' values) once, and receives each row's RowView -- from a RowEngine per
// thread on the CPU, or from the CUDA engine (sparse_attn_cuda.hpp) -- with the same bits.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "stage/stage.hpp"
#include "engines/sparse_attn/sparse_attn_core.hpp"

namespace dsa::attn {

struct RowSource {
  std::int64_t R = 0, H = 0, D = 0, dv = 0;
  const std::uint16_t* q = nullptr;  // [R, H, D] bf16 bits
  double sm = 0;
  bool vabs = false;  // RowView::vabs wanted
  // Row r's key ids in the reference order (cleared by the callee).
  std::function<void(std::int64_t r, std::vector<std::int64_t>& ids)> ids;
  // CPU: key id's D values.
  std::function<void(std::int64_t id, double* k)> key;
  std::int64_t id_space = 0;  // ids lie in [0, id_space)
  // CUDA: the device's key table. By default a compact f32 table of the keys the rows use (from `key`, so exactly
  // the CPU's values: bf16 values and any NaN are exact in f32), the ids renumbered into it. A stage whose keys
  // already sit in one bf16 tensor [id_space, D] gives it here instead (no copy, ids unchanged).
  const std::uint16_t* bf16_table = nullptr;
  // CUDA: every value `key` gives is a bf16 value (or NaN): the compact table is then built in bf16 (half the host
  // writes and the upload of the f32 one; the same values on the device).
  bool keys_bf16 = false;
};

// Every row r in [0, R): write(r, view), in parallel over rows (threads: the CPU's OpenMP threads; the host part of
// the CUDA path uses them too).
void run_rows(const RowSource& src, Backend backend, int threads, const std::function<void(std::int64_t, const RowView&)>& write);

}  // namespace dsa::attn
