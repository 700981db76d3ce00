// Shared pieces of the indexer family's input generators (each stage's golden.cpp). Every value comes from the
// counter RNG (src/numerics/rng.hpp) as Rng(seed).fork(tensor).fork(row): rows can be generated in parallel and the
// bits do not depend on the thread count or the machine.
#pragma once
#include "layouts/indexer_kcache.hpp"
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "numerics/rng.hpp"
#include "stage/golden_spec.hpp"
#include "tensor/tensor.hpp"

namespace dsa::gen {

using golden::GoldenSpec;

// Sub-stream ids, one per generated tensor (never reuse an id for two tensors of one case).
enum Stream : std::uint64_t { kX = 1, kQ, kK, kW, kLnW, kLnB, kKv, kSlots, kPoison, kPerm, kLogits, kRows, kPad };

inline int nthreads(int t) { return t > 0 ? t : omp_get_max_threads(); }
inline float f32(double x) { return static_cast<float>(x); }
inline double pow2(std::int64_t e) { return std::ldexp(1.0, static_cast<int>(e)); }

// Parallel loop over rows; row r draws from its own sub-stream of tensor stream `tid`.
template <class F>
void for_rows(const Rng& root, std::uint64_t tid, std::int64_t rows, int threads, F&& fn) {
  const Rng base = root.fork(tid);
#pragma omp parallel for schedule(static) num_threads(nthreads(threads))
  for (std::int64_t r = 0; r < rows; ++r) {
    Rng rng = base.fork(static_cast<std::uint64_t>(r));
    fn(r, rng);
  }
}

// N(0, sigma) with probability p_out of an outlier scaled by 2^U{3..10} (activation outliers).
double gauss_outlier(Rng& r, double sigma, double p_out);
// Fisher-Yates permutation of [0, n) from one stream.
std::vector<std::int64_t> permutation(Rng rng, std::int64_t n);
// act_quant (ue8m0) of one bf16 row of n values (one block when n <= 128): codes into y, returns the first scale.
float quant_bf16(const std::uint16_t* x, std::int64_t n, std::uint8_t* y);
extern const float kInvSqrt128;  // fl32(128^-0.5)

// What the engines feed the logits kernels: q = act_quant(bf16 q) per head (scale folded into the gates),
// W = fl32(fl32(w * q_scale) * fl32(128^-0.5)). `sign` < 0 forces negative q entries (pre-ReLU scores < 0 when
// the keys are positive), `mixed_every` > 0 keeps every mixed_every-th head unconstrained.
struct QBuild {
  Tensor q_fp8, weights;
};
QBuild make_q(const Rng& root, std::int64_t rows, std::int64_t H, std::int64_t D, int threads, int sign = 0,
              std::int64_t mixed_every = 0, std::int64_t mixed_row_mod = 2);
// Keys: bf16 gaussian (or |gaussian| when positive) -> act_quant per token (ue8m0): codes [N, D], scales [N].
void make_keys(const Rng& root, std::uint64_t tid, std::int64_t N, std::int64_t D, int threads, bool positive,
               std::uint8_t* codes, float* scales);
// Random poison bytes for `rows` rows of `width` bytes (cache contents a kernel must not read or must keep).
void poison_bytes(const Rng& root, std::int64_t rows, std::int64_t width, int threads, std::uint8_t* dst);

std::vector<std::int64_t> list_or(const GoldenSpec& s, const std::string& k, std::vector<std::int64_t> def);
// The indexer K-cache layout a spec's attr `layout` names (indexer_kcache_planar when absent).
layouts::IndexerKCache spec_kcache(const GoldenSpec& s, std::int64_t page_size, std::int64_t head_dim);

}  // namespace dsa::gen
