// The per-candidate arithmetic of the Ascend lightning-indexer references that the CPU (ascend_li.cpp, the stages'
// cpu.cpp) and the CUDA backend (the stages' cuda.cu) share (architecture.md, determinism contract way 3: one fixed
// sequence of IEEE fp64 operations compiled for both, -ffp-contract=off / --fmad=false). Plain C++17 with DSA_HD
// numerics only, so nvcc compiles it for the device.
//   widen        one element of a bf16 / fp16 / f32 / e4m3fn / int8 tensor as f64 (exact)
//   dot64        s = sum_d q_d k_d and a = sum_d |q_d k_d| in f64, d = 0..D-1 in turn (heads_dot64 per head)
//   canonical    NaN -> one fixed code: the bits of a NaN depend on the ISA's operation order (x86 keeps the first
//                operand's payload and sign, the GPU gives its own), so scores and bounds leave the core canonical
#pragma once
#include <cstdint>
#include <cstring>

#include "numerics/half_core.hpp"
#include "numerics/hd_ops.hpp"

namespace dsa::engines::ascend_li::core {

using i64 = std::int64_t;

using hd::from_bits64;
DSA_HD inline double max0(double x) { return x < 0.0 ? 0.0 : x; }  // std::max(x, 0.0): NaN and -0 pass through
DSA_HD inline double neg_inf() { return from_bits64(0xFFF0000000000000ull); }
DSA_HD inline double canonical(double x) { return x != x ? from_bits64(0x7FF8000000000000ull) : x; }
// g(n, u) = n u / (1 - n u): the any-order summation factor of n additions (0 for n <= 0).
DSA_HD inline double gamma_n(i64 n, double u) {
  return n <= 0 ? 0.0 : static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u);
}

// Element kinds of the scored tensors (ascend_li::widen maps DType to these).
enum class Elem : int { bf16 = 0, fp16 = 1, f32 = 2, e4m3 = 3, int8 = 4 };

DSA_HD inline double widen(const void* base, Elem e, i64 i) {
  switch (e) {
    case Elem::bf16: return static_cast<double>(halfcore::bf16_to_f32(static_cast<const std::uint16_t*>(base)[i]));
    case Elem::fp16: return static_cast<double>(halfcore::fp16_to_f32(static_cast<const std::uint16_t*>(base)[i]));
    case Elem::e4m3: return static_cast<double>(halfcore::e4m3_to_f32(static_cast<const std::uint8_t*>(base)[i]));
    case Elem::int8: return static_cast<double>(static_cast<const std::int8_t*>(base)[i]);
    default: return static_cast<double>(static_cast<const float*>(base)[i]);
  }
}

// s = sum_d q(d) k(d), a = sum_d |q(d) k(d)| (f64, d = 0..D-1 in turn; q(d), k(d) return the widened operands).
template <class Q, class K>
DSA_HD inline void dot64(Q q, K k, i64 D, double& s, double& a) {
  double ss = 0, aa = 0;
  for (i64 d = 0; d < D; ++d) {
    const double x = q(d) * k(d);
    ss += x;
    aa += hd::abs(x);
  }
  s = ss;
  a = aa;
}

// Flat cache slot of request b's j-th visible key: block_table[b][j / bs] * bs + j % bs.
DSA_HD inline i64 key_slot(const std::int32_t* block_table, i64 maxblk, i64 bs, i64 b, i64 j) {
  return static_cast<i64>(block_table[b * maxblk + j / bs]) * bs + j % bs;
}

// The candidates a per-candidate score kernel walks (indexer.npu_lightning and v4.indexer on the GPU, and their
// kernel bodies on the host): row t scores the first row_nvis[t] visible keys of request row_b[t] in the paged
// cache into scores [T, C]. Host pointers on the host; the stages' cuda.cu bind device copies (engines::ascend_li::DevicePagedRows).
struct PagedRows {
  i64 T = 0, H = 0, D = 0, key_slots = 0;
  const double* weights = nullptr;  // [T, H] the per-(row, head) operand in f64
  const std::int32_t* block_table = nullptr;
  i64 B = 0, maxblk = 0, bs = 0;
  const i64* row_b = nullptr;     // [T] each row's request
  const i64* row_nvis = nullptr;  // [T] each row's visible keys (<= C; their blocks checked by parse_call)
  i64 C = 1;                      // score row width (score_buffers)
  // Flat cache slot of row t's j-th visible key.
  DSA_HD i64 slot(i64 t, i64 j) const { return key_slot(block_table, maxblk, bs, row_b[t], j); }
};

}  // namespace dsa::engines::ascend_li::core
