// mla.kcache_store — write [c (512) | k_pe (64)] tokens into the 656-byte fp8 MLA cache (spec v32 §6.3, layout
// `mla_fp8_656`), bit-exact. kv_cache = copy of kv_cache_in; for each token t with slot = slot_mapping[t] >= 0
// (page = slot / page_size, offset = slot % page_size):
//   per tile j (dims [128j, 128j+128)): amax = max |c| (exact), scale s_j by the shared scale rule (engines/quant:
//   attrs scale_fmt, eps_on, amax_eps; every writer stage takes the same values), e.g.
//     pow2 (default) 2^ceil(log2(max(fl32(amax/448), 1e-4)))          FlashMLA @HEAD tests, vLLM fp8_ds_mla (2026-07+)
//     ue8m0       2^ceil(log2(fl32(max(amax, 1e-4) * fl32(1/448))))   DeepSeek demo act_quant(kv, 128, "ue8m0")
//     fp32_mul    fl32(max(amax, eps) * fl32(1/448))                  torch `amax / 448` on CUDA tensors (PyTorch
//                 multiplies by the fp32 reciprocal of a scalar divisor): FlashMLA tests @1408756 with amax_eps 0
//     fp32_div    fl32(max(amax, eps) / 448)                          CUDA C / torch on the CPU; amax448 = no floor
//     flt_min     max(fl32(amax/448), FLT_MIN)                        vLLM concat_and_cache_ds_mla (2026 version)
//     bf16_*      the scale rounded to bf16                           writers that keep the scale tensor in bf16
//   codes = e4m3(clamp(c/s, +-448)) (`scale_apply` div) or e4m3(clamp(fl32(c * fl32(1/s)), +-448)) (mul_inv), RNE,
//   a NaN quotient (0/0) stored as 0x7F (the CUDA cast's NaN code);
//   the 4 scales as raw fp32, k_pe as raw bf16 bits.
// slot -1 = padded token, skipped. parse() rejects out-of-range and duplicate slots (order-independent store).
// Attr layout = model1_fp8_584 (DeepSeek-V4, FlashMLA MODEL1; layouts/mla_kcache.hpp): kv_c holds the 448 NoPE dims, 7
// tiles of 64 with power-of-two scales (scale_fmt pow2: FlashMLA's quantize_k_cache; ue8m0: vLLM's V4 main store,
// amax clamped before the fl32(1/448) multiply), stored as e8m0 bytes (exponent + 127; NaN 0xFF) in the block's scale
// records, pad byte 0 (vLLM writes it; FlashMLA's test leaves it uninitialised); codes e4m3(c / s) (exact division).
// Attr layout = a kv record (layouts/kv_records.hpp: v41_mxfp8_528, v41_nvfp4_288, sglang_mxfp4_368,
// flashmla_nvfp4_352, nvfp4_384, nvfp4_432): [kv_c | k_pe] (nope + 64 dims) quantized by the record's codec with its
// producer's rule or the one the attrs name (record_order, mxfp8_rule, nvfp4_rule, mxfp4_rule, e2m1_*, rope_cast,
// quant_source), stored region by region; the pad bytes its writer stores written 0, the others untouched.
#pragma once
#include "layouts/kv_records.hpp"
#include "layouts/mla_kcache.hpp"
#include "stage/stage.hpp"
#include "engines/quant/block_quant.hpp"

namespace dsa::mla::kcache_store {

struct Params : dsa::Params {
  layouts::MlaKCache layout;
  bool model1 = false;
  layouts::Model1KCache m1;
  quant::QuantParams quant;  // fmt, apply, eps; clamp on
  bool record = false;       // a kv record layout (kv_records.hpp)
  layouts::RecordParams rp;
};

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the quantization on the GPU
#endif
// The reference's frame without the store (cpu.cpp): kv_cache = a copy of kv_cache_in, with the describe of every
// slot (the token written there); cpu() and cuda() then store into it.
Expected cpu_frame(const Case& c, const Params& p, const RefOptions& opt);
// kv record layouts: the [T, nope + 64] fp32 values the writer quantizes (kv_c, then k_pe rounded to bf16 unless
// quant_source fp32).
std::vector<float> record_values(const Case& c, const Params& p);
// The kv record writer, correct (none) or with a real bug's shape (the selftest's mutants and the hints `check` gives on
// a failing cache: Stage::hypotheses).
enum class RecordBug {
  none,
  rope_fp32,              // B49: the RoPE dims quantized from the unrounded fp32 values (a bf16 source declared)
  tie_flip,               // B50: e2m1 midpoints the other way (half-down where RNE is declared, and back)
  zero_flip,              // B51: the other sign of a zero code (0x8 <-> 0x0)
  nibbles_swapped,        // B52: the two nibbles of every code byte swapped
  codes_unrounded_scale,  // B53: codes from the unrounded scale, the stored scale rounded
  scatter_row_offset,     // B55: token i of the batch stored at slot + i (the source row offset added)
  order_swapped,          // v41 §2.3: page_segregated and token_interleaved confused
  scales_unpermuted,      // v41 §2.4: the 352-byte record's scales in natural order (the 4x8 interleave missed)
  mx4_floor_1e4,          // B54: the MXFP4 amax floor 1e-4 (vLLM #41015) where 6 * 2^-126 is declared
};
Expected cpu_record(const Case& c, const Params& p, RecordBug bug, int threads);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::mla::kcache_store
