// v41.indexer_k — the DeepSeek-V4.1 indexer K store as vLLM runs it (spec v41 §5; vLLM
// vllm/models/deepseek_v41/common/ops/indexer_k_store.py `indexer_k_norm_rope_store`, one Triton program per
// token; the wk(latent) GEMM before it runs in torch). For token t with slot s = kv_slot_mapping[t] >= 0 whose
// position p closes a group ((p + 1) % cmp_ratio == 0; other tokens write nothing):
//   k = bf16(k_pre[t] * rsqrt(sum(k_pre[t]^2) / 128 + eps) * norm_weight)     (fp32; Triton's approximate rsqrt)
//   RoPE of dims 64..127 (GPT-J interleaved pairs (64 + 2i, 65 + 2i)) at the group start g = (p / r) * r:
//     cos = cos_sin_cache[g][i], sin = cos_sin_cache[g][32 + i]; k = bf16(rotated)
//   stored into the paged indexer K cache, per page the values of every slot, then their scales:
//     layout v41_idx_mxfp4_68: 4 MXFP4 blocks of 32 (e = ceil(log2(max(amax, 6 * 2^-126) * fl32(1/6))), codes
//       e2m1 RNE of x * 2^-e, dims 2j / 2j + 1 in the low / high nibble of byte j, ue8m0 bytes e + 127);
//     layout v41_idx_fp8_132: one e4m3 block of 128 (e = ceil(log2(max(amax, 1e-4) * fl32(1/448))), codes
//       e4m3(clamp(x * 2^-e, +-448)), the scale 2^e as fp32).
// Every other byte equals k_cache_in (mid-group tokens, pads, the null page, the other slots).
//
// The reference computes the normalized and rotated k in fp64 with a rigorous bound on what an fp32 kernel with an
// approximate rsqrt can hold (engines/v4_compress norm_rope, shared with the compressors) and writes the bytes of
// the exact value; where the bound reaches across a bf16 rounding boundary (and so possibly across a scale step),
// the bytes of the neighbouring roundings are accepted candidates of that byte (engines/quant/byte_cands,
// RefTensor::candidates): verdict WITHIN_BOUND, every other byte exact.
#pragma once
#include <cstdint>
#include <vector>

#include "layouts/kv_records.hpp"
#include "stage/stage.hpp"

namespace dsa::v41::indexer_k {

// Known bugs the selftest reproduces through the reference and `check` names as hints (never set by a dump).
enum class Bug {
  none,
  rope_at_position,  // RoPE at the token's own position p instead of its group's start (p / r) * r
  rope_halves,       // B58: halves-style RoPE pairs (64 + i, 96 + i) instead of interleaved (64 + 2i, 65 + 2i)
  quant_fp32,        // B49: the fp32 RoPE result quantized without its bf16 rounding
  gate_ignored,      // v41 §4: mid-group tokens write a key too (into their group's slot)
  e2m1_ties_down,    // B50: e2m1 midpoints rounded down (DeepGEMM's utility) instead of to even
  mx4_floor_1e4,     // B54: the MXFP4 amax floor 1e-4 instead of 6 * 2^-126
};

struct Params : dsa::Params {
  std::int64_t r = 2, T = 0;
  double eps = 1e-6;  // as the kernel holds it: fl32(norm_eps)
  layouts::KvRecord rec;  // v41_idx_mxfp4_68 or v41_idx_fp8_132, page_segregated, page_size = k_cache_in dim 1
};

// The tokens that write (in token order): slot >= 0 inside the cache, the group gate passed (or ignored: the bug).
std::vector<std::int64_t> emitting(const Case& c, const Params& p, Bug bug);
// The reference (bug none) or a known bug's output.
Expected run(const Case& c, const Params& p, Bug bug, int threads);
// The reference with the emitting tokens' key values and bounds [emitting, 128] the CUDA backend computed (cuda.cu)
// instead of the host's.
Expected run_with_keys(const Case& c, const Params& p, int threads, const std::vector<double>& y, const std::vector<double>& ey);
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);
std::vector<Hypothesis> hypotheses();
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v41::indexer_k
