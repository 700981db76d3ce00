// The `flashmla-sm90` emulation of FlashMLA's sm90 sparse prefill kernel (flash_mla_sparse_fwd, phase1.cuh @9241ae3,
// --use_fast_math): the operations of reference/flashmla_sm90.py -- the measured bf16 WGMMA accumulation, the
// measured ex2 / rcp / lg2 approximations (tables embedded from sm90_mufu.bin), the kernel's order of warpgroups,
// tiles and sums -- in C++ (docs/research_flashmla_sm90.md: 100 % of out / max_logits / lse of 17 real captures).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dsa::profiles::flashmla_emu {

// The measured MUFU approximations (ftz): ex2.approx.f32 (exact for x <= 0; for x > 0 the same rule is close, not
// exact: from 1 in 8,388,608 inputs differing in [2^-23, 2^-22) to half of them in [1/2, 1)), rcp.approx.f32 (x > 0),
// lg2.approx.f32 (finite x >= 1). Throw std::runtime_error if the embedded tables do not decode.
float ex2_approx(float x);
float rcp_approx(float x);
float lg2_approx(float x);
// Below 1, lg2.approx is not measured: [lo, hi] holds every fp32 within 2^-22 of log2(x) for x in (0, 1) (the unit's
// absolute error is below 2^-22.5 everywhere it is measured, [1, 2^16)). An emulated value is accepted only where
// both ends give the same bits (every step after lg2 is monotone in it); elsewhere the emulation declines.
void lg2_unmeasured_bounds(float x, float& lo, float& hi);

// One query row i of the prefill: q [h_q, d_qk] bf16 bits of the row, kv [s_kv, d_qk] bf16 bits, the row's
// indices (topk of them, already cut to the kernel's ceil(topk_length / 64) blocks when topk_length is given:
// ids past it must be marked invalid by the caller with n_valid_prefix), sink [h_q] (null: none), the fp32
// sm_scale. Writes out [h_q, 512] bf16 bits, max_logits and lse [h_q] (natural log, FlashMLA 2026+).
struct PrefillRow {
  const std::uint16_t* q = nullptr;
  std::int64_t h_q = 0, d_qk = 0;
  const std::uint16_t* kv = nullptr;
  std::int64_t s_kv = 0;
  const std::int64_t* idx = nullptr;  // topk entries
  std::int64_t topk = 0;
  std::int64_t length = -1;           // topk_length of the row (< 0: none)
  const float* sink = nullptr;
  float sm_scale = 0;
};
// False (nothing written) where the model does not apply: d_qk not 512 / 576, h_q not a multiple of 64, topk not a
// multiple of 64 (without topk_length), a non-finite q or indexed kv value, an lse that depends on lg2.approx below 1
// (lg2_unmeasured_bounds); `why` says which.
bool prefill_row(const PrefillRow& r, std::uint16_t* out, float* max_logits, float* lse, std::string& why);

}  // namespace dsa::profiles::flashmla_emu
