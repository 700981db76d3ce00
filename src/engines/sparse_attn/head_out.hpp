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

}  // namespace dsa::attn
