// v41.logits — DeepGEMM's FP4 indexer logits of DeepSeek-V4.1 (spec v41 §5): fp8_fp4_mqa_logits (ragged) and
// fp8_fp4_paged_sparse_mqa_logits (DeepGEMM 2.8, the two-level candidates' consumer), on MXFP4 queries and keys:
//   logit(r, key) = sum_h w[r, h] * relu(sum_d q[r, h, d] * k[key, d])
// with q[r, h, d] = e2m1(q_fp4 nibble d) * 2^(q_sf byte d / 32 - 127) (q_fp4 [R, H, D/2] packed, dim 2i in the low
// nibble; q_sf [R, H] int32 = D/32 ue8m0 bytes, little-endian) and k likewise: ragged kv_fp4 [N, D/2] + kv_sf [N]
// int32; paged the 68-byte MXFP4 records of the V4.1 indexer K cache (layouts v41_idx_mxfp4_68, page_segregated).
//   ragged: column j = key j, rows see [ks[r], ke[r]) (clean_logits: -inf elsewhere, else undefined).
//   paged sparse: column c = position blocks[r][c / sparse_block_kv] * sparse_block_kv + c % sparse_block_kv of the
//     row's sequence (block_table[r] maps its pages); positions >= context_lens[r] and padded blocks (-1) are -inf
//     with clean_logits (the top-k after it must never pick them), else undefined.
// The products of e2m1 values and power-of-two scales are exact; the reference sums in fp64 and judges the kernel's
// fp32 accumulation (any order) and its output rounding by a derived bound (tolerance derived-bound):
//   M = (D + H + 2) 2^-24 sum_h |w| sum_d |q k| + D sum_h |w| 2^-126 (fp32 flush of tiny products)
//       + one output rounding of the kernel and one of the reference (2^-8 |v| each for bf16, 2^-24 for fp32).
// Preconditions (exit 2): DeepGEMM's sparse contract (B59: strictly increasing unique block lists, -1 padding after;
// page stride a multiple of 512 bytes; page_size a multiple of sparse_block_kv; num blocks a multiple of 4, <= 4096;
// next_n 2: row pairs with identical block tables and lists), H in 8..64, D 64 or 128, bf16 weights need bf16 logits.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "layouts/kv_records.hpp"
#include "numerics/rng.hpp"
#include "stage/stage.hpp"

namespace dsa::v41::logits {

enum class Bug { none, no_relu, nibbles_swapped, kv_scale_ignored, sparse_map_ignored };

struct Params : dsa::Params {
  bool paged = false, clean = true, bf16 = false;
  std::int64_t R = 0, H = 0, D = 0, cols = 0, sbk = 8, nsb = 0, next_n = 1, maxp = 0;
  layouts::KvRecord rec;  // paged: v41_idx_mxfp4_68 pages
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// The host side both backends share: the row operands (packed q scale words, weights as doubles, the key bytes: kv_fp4
// or the cache), each output element's key (byte offset of its codes in those bytes and its packed scale word, or
// kUndefined / kNegInf), and the packaging of computed logits into the bounded RefTensor.
struct Operands {
  std::vector<std::uint32_t> qsf;  // [R * H]
  std::vector<double> w;           // [R * H]
  const std::uint8_t* keys = nullptr;
};
struct KeyRef {
  static constexpr std::int64_t kUndefined = -1, kNegInf = -2;
  std::int64_t off;  // >= 0: byte offset of the key's codes in Operands::keys
  std::uint32_t sf;
};
}  // namespace dsa::v41::logits
#include "stages/v41/logits/core.hpp"
namespace dsa::v41::logits {
Operands operands(const Case& c, const Params& p);
KeyRef key_ref(const Case& c, const Params& p, std::int64_t r, std::int64_t col, Bug bug);
Expected package(const Case& c, const Params& p, const std::vector<std::int64_t>& state, const std::vector<core::Logit>& l);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the logits on the device
#endif

// Logit (value, bound M) of row r and output column col; nullopt where undefined; -inf columns as (-inf, 0).
std::optional<std::pair<double, double>> logit(const Case& c, const Params& p, std::int64_t r, std::int64_t col, Bug bug);

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
Expected run(const Case& c, const Params& p, Bug bug, int threads);
std::vector<Hypothesis> hypotheses();
std::vector<golden::Generator> generators();
// A V4.1 indexer K cache of earlier tokens for generated cases (this stage's and layer_v41_decode's): every one of its
// `slots` slots (page_size per page) a v41_idx_mxfp4_68 record of bf16(N(0, 1) * 2^U{-4..4}) values drawn from g.
void fill_random_k_cache(std::uint8_t* cache, std::int64_t slots, std::int64_t page_size, Rng g);
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v41::logits
