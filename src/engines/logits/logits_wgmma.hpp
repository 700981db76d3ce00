// The Hopper engine of the exact indexer logits (logits_wgmma.cu, built for sm_90a only): the same outputs, bit for
// bit, as the mma.sync engine of logits_cuda.cu and the CPU, 2.6x faster than it. Called by logits_cuda.cu's host side
// with device pointers; plain C++17 and CUDA types only.
//
// Exact s_h * 2^18 with six int8 GEMM units instead of nine (Toom-3 at the points 0, 1, -1, infinity).
// The balanced base-64 digits x0, x1, x2 of a code (exact_digits.hpp) define x(t) = x0 + x1 t + x2 t^2, and
// sum_d x_d y_d = sum_g c_g 2^(6g), with c_g = sum_{i+j=g} sum_d x_i y_j the coefficients of the product polynomial.
// With P1 = sum_d x(1) y(1) and Pm1 = sum_d x(-1) y(-1) (x(1) = x0+x1+x2 in [-120, 118], x(-1) = x0-x1+x2 in
// [-119, 119]: int8):
//   c0 + c2 + c4 = (P1 + Pm1) / 2,   c1 + c3 = (P1 - Pm1) / 2,
// so with low = c0 + 64 c1 and H' = (65 P1 - 63 Pm1) / 2 + 4095 c4 (= high + low, high = c2 + 64 c3 + 4096 c4):
//   s * 2^18 = low + 4096 high = 4096 H' - 4095 low.
// Units: P1, Pm1, c4 = x2 y2, c1 = x0 y1 + x1 y0 (two), c0 = x0 y0. Bounds for D <= 128 (|x0|, |x1| <= 32,
// |x2| <= 56): |P1|, |Pm1| <= 128 * 120^2 < 2^21, |c4| <= 401408, |low| < 2^25, |H'| <= 1.69e9 < 2^31 (int32, the
// tensor cores' accumulator, never wraps), |s * 2^18| < 2^43. The kernel keeps two int32 accumulators per score:
// R = P1 and T = Pm1, then R = X = 65 P1 - 63 Pm1 (even: 64 (P1 - Pm1) + 2 (c0 + c2 + c4); |X| < 2^28), T = c4,
// T *= -64, T += c1, T *= 64, T += c0, so T = Y = low - 4096 c4 (|Y| <= 1.67e9 < 2^31), and
//   s * 2^18 = 4096 (X / 2 + 4095 c4) - 4095 low = 2048 X - 4095 Y:
// one integer step between the tensor-core rounds, each on the accumulator the next round adds to. The fp64 value
// of 2048 R - 4095 T comes from two integer multiply-adds and one int64 -> fp64 conversion (exact: |n| < 2^43); relu is r + |r| =
// 2 relu(r) against weights halved in shared memory (w 2^-19: the same products, so the same fma results).
//
// Then the head reduction of logits_core.hpp in the CPU's order: the matrix is keys (M, 64 per warpgroup tile) x
// (row, head) columns (N = 64 or 128: N / H rows of one batch), so a thread's accumulator fragment holds, for each of
// its two keys, the heads h = 8 j + 2 tig + e of lanes 2 tig + e in increasing h: every lane sum is in one thread,
// tree8 is the in-thread pair sum and two xor-shuffles. relu(s) w_h is computed as 2 relu(S) (w_h 2^-19) with the
// integer S = s 2^18: both are the rounding of the same real product (no underflow, no overflow), so the same bits.
// After the butterflies every lane of a quad holds its two keys' sums, so the divergent certificate runs once a pass
// with each lane taking one logit: two rows x two keys; with one row a tile (N 64 a warpgroup and H 64, or H 128),
// a warpgroup's even tiles keep their two logits in registers and its odd tiles store them beside their own.
//
// Tiles stream over keys: per block, two tile blocks (64 keys each) are in flight, and the row group's query digit
// planes sit in shared memory once. N 128 with H <= 64 runs four warpgroups, two to a tile block, each computing
// 64 of the 128 columns (its rows: a row's heads stay in one warpgroup, so the head-lane order is unchanged): 64
// accumulators a thread, 128 registers, four warps per scheduler to cover the epilogue's dependent chains. Other
// shapes (N 64, H 128) run two warpgroups, one to a tile block. A block's first warpgroup reloads it during the
// epilogue (one bulk copy on an mbarrier when the tile is an aligned block of the key array, else a per-key cp.async
// gather through the block table) once every warpgroup of the block has read it. The warpgroups issue their MMAs
// freely (no turns: the tensor cores interleave them; FA3-style alternating turns measured slower here). A
// persistent grid walks equal chunks of keys, so a block reconverts queries only when its row group changes.
// H100 (2026-12-06): 51.1-51.8 ms for ragged S 8192 x N 65536 x H 64 (56.1-56.8 ms in the same run before relu by
// r + |r|, the one-instruction conversion and the two-tile certificate pass; 67.9-68.9 ms before the uniform MMA
// descriptors and the certificate passes of four logits; two warpgroups taking turns: 83.9-84.3 ms; the mma.sync
// engine on an H200, 2026-12-02: 224 ms).
#pragma once
#include <cstdint>

namespace dsa::engines::logits {

// Keys live on the device as tile blocks: block b holds keys 64 b .. 64 b + 63 (physical indices: ragged key j, or
// paged token page * page_size + slot) as the five digit planes x0, x1, x2, x(1), x(-1), each 64 x 128 bytes in the
// wgmma core-matrix layout (8-key x 16-byte core matrices, 8 per key group along D), then 64 fp32 scales and 64
// NaN flags: kWgmmaBlockBytes bytes, exactly the shared-memory image of a tile, so an aligned tile is one bulk copy.
// The last block (zero_block) is all zero: keys of unmapped pages read it.
inline constexpr std::int64_t kWgmmaBlockBytes = 5 * 64 * 128 + 64 * 4 + 64;

struct WgmmaParams {
  int H = 0, D = 0, NT = 0;         // heads, dims (128), columns per tile (64, 128; NT % H == 0)
  int warpgroups = 4;               // NT 128 with H <= 64: 4 (two to a tile block) or 2 (DSA_WGMMA_WARPGROUPS=2)
  const std::uint8_t* q = nullptr;  // query codes [rows * H, D]
  const float* w = nullptr;         // [rows * H]
  const unsigned char* blocks = nullptr;  // key tile blocks, zero_block + 1 of them
  std::int64_t zero_block = 0, P = 0;     // P physical keys
  bool bulk = false;                      // tiles are whole blocks: ragged, or page_size % 64 == 0
  const std::int32_t* bt = nullptr;  // null: key j is physical key j
  std::int64_t tw = 0, ps = 1, num_pages = 0;
  const std::int64_t *lo = nullptr, *hi = nullptr, *col0 = nullptr, *batch = nullptr;
  // Row groups (up to NT / H consecutive rows of one batch) and their key ranges from gklo rounded down to a
  // multiple of 64, cut into items of kWgmmaItemKeys keys: group g owns items gprefix[g] .. gprefix[g + 1] - 1.
  const std::int64_t* grow0 = nullptr;
  const int* gnrows = nullptr;
  const std::int64_t *gklo = nullptr, *gkhi = nullptr, *gprefix = nullptr;
  std::int64_t ngroups = 0, nitems = 0;
  std::int64_t cols = 0;
  bool bf16 = false;
  void* value = nullptr;
  double* M = nullptr;
  std::uint8_t* def = nullptr;
};

inline constexpr std::int64_t kWgmmaItemKeys = 1024;  // keys per work item (16 tiles of 64)

// Whether this build carries the sm_90a engine and the current device (compute capability 9.0) can run it.
bool wgmma_engine_available();
// The H, D, N the engine supports (H in 16, 32, 64, 128 with H <= N; D = 128).
bool wgmma_engine_supports(int H, int D, int NT);
// Writes the tile blocks of P keys (blocks: zero-filled, P / 64 + 2 blocks); "" or the launch error.
const char* wgmma_build_blocks(const std::uint8_t* src, const float* scale, std::int64_t P, std::int64_t ps, std::int64_t page_bytes,
                               bool paged, unsigned char* blocks);
// Launches the engine over every item (outputs pre-filled by the caller); returns the launch's error string, "" if
// none.
const char* wgmma_engine_launch(const WgmmaParams& p);

}  // namespace dsa::engines::logits
