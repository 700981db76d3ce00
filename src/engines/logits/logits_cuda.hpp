// The CUDA engine of the exact indexer logits (indexer.logits_ragged, indexer.logits_paged), callable from C++20 code:
// plain arguments, std::runtime_error on a CUDA failure (logits_cuda.cu).
//
// Exact q.k on int8 tensor cores (../shared/specs/gpu_exact_dot.md, numerics/exact_digits.hpp): every e4m3 code is
// an integer x = value * 2^9 with three balanced base-64 int8 digits, so s_h * 2^18 = sum_{i,j} 2^(6(i+j)) sum_d
// x_i y_j: nine int8 mma.sync products, int32 sums per shift (no overflow for D <= 128), folded in fp64 (integers
// < 2^53: exact). Then the head reduction, M and the rounding certificate of logits_engine.hpp (2) through
// logits_core.hpp, the same operations in the same order as the CPU. Logits whose certificate fails are marked
// defined = 2 and rounded by the caller with logits::exact_from_codes (exact, so any backend gives the same bits).
// Device memory: the inputs, their digit planes (3 bytes per code), the outputs and O(1) per block: no [H, S, N]
// score tensor.
#pragma once
#include <cstdint>

namespace dsa::engines::logits {

struct GpuLogitsJob {
  int H = 0, D = 0;
  std::int64_t rows = 0;              // local rows 0 .. rows-1 (the caller's row tile)
  const std::uint8_t* q = nullptr;    // [rows, H, D] e4m3 codes
  const float* w = nullptr;           // [rows, H]
  // Keys, ragged (cache == nullptr): kv [nkeys, D] codes and kv_scale [nkeys]; paged: the indexer_kcache_planar cache
  // [num_pages, page_size, 1, D + 4] read through block_table [batches, table_width] (key j of batch b: page
  // block_table[b, j / page_size], slot j % page_size).
  const std::uint8_t* kv = nullptr;
  const float* kv_scale = nullptr;
  std::int64_t nkeys = 0;
  const std::uint8_t* cache = nullptr;
  std::int64_t num_pages = 0, page_size = 0;
  const std::int32_t* block_table = nullptr;
  std::int64_t batches = 0, table_width = 0;
  // Per local row: keys [lo, hi) (hi <= lo: none), output column of key j = j - col0, batch (block-table row).
  const std::int64_t* lo = nullptr;
  const std::int64_t* hi = nullptr;
  const std::int64_t* col0 = nullptr;
  const std::int64_t* batch = nullptr;
  std::int64_t cols = 0;
  bool bf16 = false;
  bool all_defined = false;  // columns without a logit are defined (-inf) rather than undefined
  // Outputs [rows, cols], every element written: value bits (bf16 u16 / fp32), M (0 where no logit), defined (0/1;
  // 2 = the certificate failed: the caller rounds that logit exactly and sets 1).
  void* value = nullptr;
  double* M = nullptr;
  std::uint8_t* defined = nullptr;
  // Filled in: device time (ms, CUDA events) from the first upload to the end of the logits kernel, the logits
  // kernel's alone, and the device bytes allocated in all (an upper bound of the peak).
  double device_ms = 0, kernel_ms = 0;
  std::int64_t device_bytes = 0;
  const char* engine = "";  // the kernel that ran: "wgmma-n128", "wgmma-n64" (logits_wgmma.hpp) or "mma.sync"
};

void logits_cuda(GpuLogitsJob& job);

}  // namespace dsa::engines::logits
