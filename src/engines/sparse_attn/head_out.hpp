// Writing one head's results of a row engine (CPU RowEngine::view() or the CUDA engine) into the stages' reference
// tensors, with the conventions a dump's attrs pin (spec v32 §6.1/§6.2, real_bugs_2026 B35): lse base, the value of
// lonely rows, the sink and whether the public lse includes it. Bounds per sparse_attn.hpp (2)-(4).
#pragma once
#include <cstdint>
#include <string>

#include "tensor/expected.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"

namespace dsa::attn {

struct Conventions {
  bool base2 = false;              // lse / max_logits in log2 units (FlashMLA sparse prefill 2025 release)
  bool lonely_lse_pos_inf = true;  // lse of a row without valid keys: +inf (2026+, decode) or -inf (2025 prefill)
  bool lse_includes_sink = false;  // public lse = logaddexp(lse, sink) (FlashMLA: sink-exclusive)
};

// Destinations of one head (null = not produced by this stage).
struct HeadDst {
  std::uint16_t* out = nullptr;  // dv bf16 bits
  double* out_m = nullptr;       // dv bounds
  float* lse = nullptr;
  double* lse_m = nullptr;
  std::uint8_t* lse_def = nullptr;
  float* max_logits = nullptr;
  double* max_m = nullptr;
  std::uint8_t* max_def = nullptr;
};

void write_head(const RowView& e, std::int64_t h, std::int64_t dv, const float* sink, const Conventions& cv, const HeadDst& d);

// Helper for RefTensors: a bounded output whose magnitude M is the derived bound (policy `derived-bound`).
RefTensor bounded_ref(std::string name, Tensor value, Tensor bound, Tensor defined = {});

// FlashMLA's own test metric (tests/lib.py check_is_allclose), reported beside the verdict.
PeerMetric flashmla_metric(double abs_tol, double rel_tol, double cos_tol);

// The systematic-error gate of the sparse MLA outputs (RefTensor::systematic_floor; docs/checking.md "Systematic
// error"). A correct kernel's error has a zero-mean part (every RNE rounding: P and out to bf16, the fp32 sums) and a
// biased part bounded by its approximate functions: ex2.approx / lg2.approx (relative error <= 2^-22 each, entering
// numerator and denominator alike, so <= 2^-21 in out = O / L and <= 2^-21 absolute in lse) and one-sided fp32
// reductions (<= n * 2^-24 relative for n keys: 2^-11 at the largest topk, 2^13 keys). The floors sit above both:
//   out  2^-10 relative (a scale error out = ref * (1 + b)); 2% and 0.5% shifts pass the per-element bound today
//   lse  2^-14 relative to mean |lse| (an offset error lse = ref + a, e.g. a wrong constant in the log-sum-exp)
// and a fit must also stand 6 standard errors (from its own residuals) away from zero.
inline constexpr double kSystematicOut = 0x1p-10, kSystematicLse = 0x1p-14;

}  // namespace dsa::attn
