// Shared machinery of indexer.logits_ragged / indexer.logits_paged — DeepGEMM fp8_mqa_logits / fp8_paged_mqa_logits
// (spec v32 §3.2-§3.6): the exact reference (contract way 2), with the `deepgemm-sm90` emulation beside it.
//
// EXACT REFERENCE
//   logit(i, j) = kv_scale[j] * sum_h relu(s_h) * W[i, h],   s_h = sum_d q[i, h, d] * k[j, d]
// rounded ONCE (RNE) from the exact real value to fp32 (or directly to bf16 for logits_dtype=bf16).
//
// (1) s_h is computed EXACTLY in fp64, in any summation order. Proof: an e4m3fn value is sig * 2^(E-3) with
//     |sig| <= 15 (4 significant bits) and E in [-6, 8] (subnormals: sig <= 7, E = -6), i.e. an integer multiple
//     of 2^-9 with |x| <= 448 < 2^8.81. A product is an integer multiple of 2^-18 with <= 8 significant bits and
//     |p| <= 448^2 = 200704 < 2^17.62. A partial sum of at most D <= 128 = 2^7 products is therefore an integer
//     multiple of 2^-18 with magnitude < 2^7 * 2^17.62 = 2^24.62, i.e. an integer n * 2^-18 with |n| < 2^42.62 <
//     2^53. Every such value is representable in fp64, so every product, every fma and every addition performed
//     on the way (by any blocking, SIMD width or order) is exact, and the dgemm below yields the exact s_h.
//     (tests/cpp/test_ref_logits.cpp checks this against integer arithmetic on codes scaled by 2^18.)
// (2) The head reduction is evaluated in fp64 (8 fixed lanes over h, lanes added pairwise) together with
//     M = |kv_scale| * sum_h |W_h| relu(s_h) and a rigorous bound err = (H+8) 2^-52 M + 2^-50 |v| on the
//     difference between the fp64 value v and the exact value. If v - err and v + err round to the same
//     fp32 (bf16) value, that is the correctly rounded exact value (rounding is monotone). Otherwise
//     (near a rounding boundary, ~2^-20 of the logits) the exact value is built in a 512-bit integer
//     (s_h = n_h 2^-18, W_h = m_h 2^e_h, kv_scale = m_s 2^e_s), rounded to odd at 53 bits and then RNE to the
//     target (53 >= 24 + 2, so that double step is exact rounding). Hence the result is independent of the
//     summation order, SIMD path and thread count.
// (3) Non-finite inputs (fp8 NaN codes, inf/NaN weights or scales): the IEEE fp64 value in the order of (2),
//     relu keeping NaN (NaN propagates; inf*0 = NaN), rounded once.
//
// Magnitude M (RefTensor::magnitude, f64) = kv_scale * sum_h |W_h| relu(s_h) per logit.
// Memory: O(output) — rows and keys are processed in tiles with per-thread buffers.
// Speed (scripts/bench.sh): ~90 % of the time is the fp64 FMA micro-kernel; Q is packed once per row block and
// thread, K is decoded with a vector e4m3 -> f16 -> f32 -> f64 conversion, and the head sums of (2) run in 8-lane
// SIMD doing the same IEEE operations in the same order as the scalar path (all paths agree bit for bit). Where the
// CPU has AMX-INT8 (logits_amx.cpp) the s_h of (1) come from six int8 digit products per q.k instead (exact
// integers: the same doubles), fed to the head lanes of (2) without being stored.
//
// EMULATION `deepgemm-sm90`: s_h by profiles::sm90::wgmma_dot, head reduction profiles::sm90::head_reduce, bf16 = RNE of
// the fp32 value; columns the kernel's clean pass sets to -inf are -inf.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "numerics/formats.hpp"
#include "tensor/expected.hpp"
#include "stage/stage.hpp"
#include "engines/logits/logits_core.hpp"
#include "engines/logits/logits_simd.hpp"
#include "tensor/tensor.hpp"

namespace dsa::engines::logits {

using i64 = std::int64_t;
using sz = std::size_t;

// Exactly rounded head reduction (see (2)).
// A NaN result is written as one fixed code: its sign would depend on the operation order of the ISA path (x86's
// default NaN is negative), and the reference must give the same bits on every machine (run_reference then writes
// every NaN as the CUDA-canonical code, docs/checking.md "NaN policy").
inline std::uint32_t round_to(double v, bool bf16) { return core::round_bits(v, bf16); }

// Exact path (the 512-bit fallback of (2)): all of s, w, sc finite, sc != 0.
std::uint32_t exact_round(const double* s, const float* w, int H, float sc, bool bf16);

// The exactly rounded logit of query codes q [H, D] against key codes k [D] (finite certified-path operands): the s_h
// by (1), then exact_round. The CUDA backend's fallback for the logits whose certificate failed on the device.
std::uint32_t exact_from_codes(const std::uint8_t* q, const std::uint8_t* k, const float* w, float sc, int H, int D, bool bf16);

inline constexpr std::uint16_t kBf16NegInf = 0xFF80;

inline void fill_neg_inf(Tensor& t) {
  if (t.dtype() == DType::bf16) {
    std::fill_n(t.data<std::uint16_t>(), t.numel(), kBf16NegInf);
  } else {
    std::fill_n(t.data<float>(), t.numel(), -std::numeric_limits<float>::infinity());
  }
}
inline void store_bits(Tensor& t, i64 idx, std::uint32_t bits) {
  if (t.dtype() == DType::bf16)
    t.data<std::uint16_t>()[idx] = static_cast<std::uint16_t>(bits);
  else
    t.data<float>()[idx] = num::f32_from_bits(bits);
}
inline std::uint32_t emu_bits(float x, bool bf16) { return bf16 ? num::f32_to_bf16(x) : num::f32_bits(x); }

// Per query row: W as f64 and |W|.
struct WeightsF64 {
  std::vector<double> wd, wa;
  explicit WeightsF64(const Tensor& w) : wd(static_cast<sz>(w.numel())), wa(static_cast<sz>(w.numel())) {
    for (i64 i = 0; i < w.numel(); ++i) {
      wd[static_cast<sz>(i)] = static_cast<double>(w.data<float>()[i]);
      wa[static_cast<sz>(i)] = std::fabs(wd[static_cast<sz>(i)]);
    }
  }
};

// Where the logits of a stage go: value bits, magnitude M and the defined flag, by flat output index.
struct LogitsOut {
  Tensor& value;
  double* M;
  std::uint8_t* defined;
  bool bf16;
};

// The reference tensors of a logits stage [rows, cols]: value -inf everywhere (bf16 or fp32), magnitude M, and the
// defined mask (all 1 when every column is defined, else set by reduce_keys as logits are written).
struct LogitsTensors {
  Tensor value, mag, def;
  Tensor emu;  // the deepgemm-sm90 emulation when a backend computed it beside the logits (else the stage does)
  bool bf16;
  LogitsTensors(i64 rows, i64 cols, bool bf16_, bool all_defined)
      : value(bf16_ ? DType::bf16 : DType::f32, {rows, cols}), mag(DType::f64, {rows, cols}), def(DType::u8, {rows, cols}), bf16(bf16_) {
    fill_neg_inf(value);
    if (all_defined) std::fill_n(def.data<std::uint8_t>(), def.numel(), std::uint8_t{1});
  }
  // Every element written by the caller (the CUDA backend fills value, M and defined on the device).
  LogitsTensors(i64 rows, i64 cols, bool bf16_, Tensor::Uninit u)
      : value(bf16_ ? DType::bf16 : DType::f32, {rows, cols}, u), mag(DType::f64, {rows, cols}, u), def(DType::u8, {rows, cols}, u), bf16(bf16_) {}
  LogitsOut out() { return {value, mag.data<double>(), def.data<std::uint8_t>(), bf16}; }
  // An emulation tensor of the same dtype and shape, -inf where the kernel writes nothing.
  Tensor emulation() const {
    Tensor t(value.dtype(), value.shape());
    fill_neg_inf(t);
    return t;
  }
  // The bounded RefTensor "logits" over these tensors (the stage adds emulations and describe).
  RefTensor ref(bool mask_must_match) const {
    RefTensor r;
    r.name = "logits";
    r.kind = CompareKind::bounded;
    r.mask_must_match = mask_must_match;
    r.value = value;
    r.magnitude = mag;
    r.defined = def;
    return r;
  }
};

// Known bugs as values (Stage::hypotheses): the logit of query row `q` (codes [H, D]) against key `k` (codes [D])
// as a kernel with the bug computes it, in f64 (the s_h are exact, see (1)).
enum class LogitBug { no_relu, no_kv_scale };
inline std::pair<double, double> buggy_logit(LogitBug bug, const std::uint8_t* q, const std::uint8_t* k, float scale,
                                             const float* w, i64 H, i64 D) {
  double sum = 0, mag = 0;
  for (i64 h = 0; h < H; ++h) {
    double s = 0;
    for (i64 d = 0; d < D; ++d)
      s += static_cast<double>(num::e4m3_to_f32(q[h * D + d])) * static_cast<double>(num::e4m3_to_f32(k[d]));
    if (bug != LogitBug::no_relu) s = std::max(s, 0.0);
    sum += s * static_cast<double>(w[h]);
    mag += std::fabs(s * static_cast<double>(w[h]));
  }
  const double sc = bug == LogitBug::no_kv_scale ? 1.0 : static_cast<double>(scale);
  return {sum * sc, mag * std::fabs(sc)};  // value, magnitude M
}
inline const char* logit_bug_id(LogitBug b) { return b == LogitBug::no_relu ? "B4" : "B6"; }
inline const char* logit_bug_doc(LogitBug b) {
  return b == LogitBug::no_relu ? "head scores summed without ReLU" : "kv_scale not applied";
}

// What a logit is computed from: the query row's codes [H, D] and gates [H], the key's codes [D] and scale.
struct LogitOperands {
  const std::uint8_t* q;
  const float* w;
  const std::uint8_t* k;
  float scale;
  i64 H, D;
  std::shared_ptr<std::vector<std::uint8_t>> keep = nullptr;  // owns k when the cache layout scatters a key's codes
};

// The Stage::hypotheses of a logits stage, one per LogitBug. `operands(case, params, flat)` locates logit `flat`
// (the stage's layout), nullopt where it is not defined.
template <typename P, typename OperandsFn>
std::vector<Hypothesis> logit_hypotheses(OperandsFn operands) {
  std::vector<Hypothesis> hs;
  for (auto bug : {LogitBug::no_relu, LogitBug::no_kv_scale})
    hs.push_back({"logits", logit_bug_id(bug), logit_bug_doc(bug),
                  [bug, operands](const Case& c, const dsa::Params& pb, i64 f) -> std::optional<Hypothesis::Value> {
                    const std::optional<LogitOperands> o = operands(c, static_cast<const P&>(pb), f);
                    if (!o) return std::nullopt;
                    const auto [v, m] = buggy_logit(bug, o->q, o->k, o->scale, o->w, o->H, o->D);
                    // A vllm-torch case is judged with rtol 1 against its derived bound: the buggy kernel's own
                    // error envelope is then the bf16 head-score rounding, 2^-7 of its magnitude (torch_logits_core.hpp).
                    if (static_cast<const P&>(pb).torch) return Hypothesis::Value{v, m * 0x1p-7};
                    return Hypothesis::Value{v, m};
                  },
                  {}});
  return hs;
}

#ifdef DSA_CUDA_BACKEND
struct GpuLogitsJob;
// Runs the CUDA engine (logits_cuda.hpp) into lt (constructed Uninit, rows x cols as the job), then rounds the logits
// whose device certificate failed exactly: exact(r, col) gives their bits (local row r); with `emulate`, lt.emu = the
// deepgemm-sm90 emulation computed on the device. DSA_CUDA_STATS=1 prints the device time, bytes and fallback count.
void run_gpu_logits(GpuLogitsJob& job, LogitsTensors& lt, const std::function<std::uint32_t(i64 r, i64 col)>& exact, bool emulate);
#endif

void reduce_keys(const Isa& isa, const double* c0, sz ldc, int n, const WeightsF64& wf, const float* w, sz wo, int H,
                 const float* scales, std::vector<double>& acc, std::vector<double>& mg, LogitsOut out, i64 o0);

// The logits of one query row (codes qrow [H, D], weights w [H]) against n keys (codes keys [n, D], scales) from their
// HeadFn sums acc/mg (amx_heads): reduce_keys' rounding, the exact fallback computed from the codes. Flat outputs o0...
void finish_keys(const double* acc, const double* mg, int n, const float* w, int H, int D, const float* scales,
                 const std::uint8_t* qrow, const std::uint8_t* keys, LogitsOut out, i64 o0);

}  // namespace dsa::engines::logits
