// attn.v4_sparse — DeepSeek-V4 sparse attention: sliding window + compressed KV + sinks, the Ascend op
// npu_sparse_attn_sharedkv (A2/A3, spec v4 §4.2-4.3, §5; seed 004 AscendDSAImpl._forward_prefill/_forward_decode),
// layout_q TND, layout_kv PA_ND, ori_mask_mode 4 (window), cmp_mask_mode 3 (causal over compressed entries).
// For query row t = cu_seqlens_q[b] + i of request b (q_len = cu_seqlens_q[b+1] - cu_seqlens_q[b], kv_len =
// seqused_kv[b], the tokens of the request including this step), position p = kv_len - q_len + i:
//   ORI keys  positions s in [max(0, p - ori_win_left), min(p + ori_win_right, kv_len - 1)], increasing, each the row
//             ori_kv[ori_block_table[b][s / bs_o]][s % bs_o][0][:]
//   CMP keys  limit = (p + 1) // cmp_ratio (entries whose group is complete at or before p); cmp_ratio 1 = no CMP
//             keys (SWA-only layers, no cmp_kv).
//             C128 (no cmp_sparse_indices): every j in [0, limit), increasing.
//             C4 (cmp_sparse_indices [T, 1, K], the QLI's per-request entry indices): the list slots
//             [0, min(K, limit)) up to the first -1, in list order. A value other than -1 before the first -1 that is
//             negative, >= limit or repeated makes the kernel's result undefined (spec §4.2): a structural input
//             error (exit 2), never guessed. Each entry is cmp_kv[cmp_block_table[b][j / bs_c]][j % bs_c][0][:].
//   z_s = softmax_scale * (q[t, h, :] . K_s)  (V_s = K_s: all D dims, MQA with one shared KV head)
//   out[t, h, :] = sum_s e^(z_s) V_s / (e^(sink_h) + sum_s e^(z_s))  (sinks absent: no sink term)   -> bf16 once
// A row without keys (kv_len < q_len makes p < 0) is 0 (InitAllZeroOutput), with or without the sink.
// The reference is the fixed-order fp64 RowEngine of the sparse MLA stages (src/engines/sparse_attn/sparse_attn.hpp)
// with keys in the order above; the sink enters as the factor f = 1 / (1 + e^(sink - lse)), the same value.
//
// Bounds (policy derived-bound: per element M, err / M <= 1). The kernel's arithmetic (attr `variant`):
//   ascend-a3      (scfa_block_vector.h): running max starts at the sink, running sum at 1, ORI tiles then CMP
//                  tiles, fp32 cube QK and PV of bf16 operands, P rounded to bf16 (CAST_ROUND) before PV, o = acc / l
//                  in fp32, bf16 RNE. Exp of the vector unit (accuracy undocumented: taken as 2^-21 relative, in
//                  the exponent error below) and tiles of at least 16 keys (the block sizes' granularity).
//   flashmla-sm90  (a FlashMLA-style CUDA kernel of the same semantics): bf16 WGMMA, ex2.approx, P bf16, 64-key
//                  tiles, the sink applied at the end as 1 / (1 + e^(sink - lse)).
// Both: sparse_attn.hpp (2) for the no-sink output (rescales counted per 16 keys for ascend-a3), plus the sink term's
// own exponent error delta_s (ascend-a3: delta_h + 2^-22 (|sink| + |m|) + 2^-21: the sink's fp32 subtraction from
// the running max and its Exp; flashmla-sm90: the kernel lse's bound + 2^-22 (|sink| + |lse|) + 2^-21) as
// 1.5 (e^(2 delta_s) - 1) + 2^-20 more of f M, and an absolute 2^-126 (1 + sum_s |V_sc|): what flushing subnormal
// P (a running max at a large sink) or an overflowing e^(sink - lse) (f = 0) can cost -- outputs below 2^-126 |V|.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::attn::v4_sparse {

enum class Variant { ascend_a3, flashmla_sm90 };

// Known bugs the selftest mutants reproduce through the reference's own key selection (never set by a dump).
enum class Bug {
  none,
  window_without_current,  // ORI window [p - win_left, p - 1]: the current token missing
  window_one_wider,        // ORI window starting at p - win_left - 1
  no_window,               // ORI keys dropped (B16)
  cmp_one_group_early,     // CMP limit (p + 2) // r: an entry visible one group early (B15)
  no_cmp,                  // CMP scope ignored
  chunk_position,          // p = i (the row inside the request) instead of kv_len - q_len + i
  cmp_window_offset,       // C4 entries read as REF's concatenated list (entry j - window)
  sink_in_numerator,       // the sink as a key with an all-ones value: out = o f + (1 - f)
  sink_dropped,            // sinks given but not applied
};

// One query row: request, position (may be negative when kv_len < q_len).
struct Row {
  std::int64_t b = 0, pos = 0;
};

struct Params : dsa::Params {
  Variant variant = Variant::ascend_a3;
  double scale = 0;
  std::int64_t win_left = 127, win_right = 0, ratio = 1;
  std::int64_t T = 0, N = 0, D = 0, B = 0;
  std::int64_t bs_o = 0, nb_o = 0, mb_o = 0;  // ori cache: block size, blocks, table columns
  std::int64_t bs_c = 0, nb_c = 0, mb_c = 0;  // cmp cache (0 without one)
  std::int64_t K = 0;                         // cmp_sparse_indices width (0: C128 / SWA, no list)
  std::shared_ptr<const std::vector<Row>> rows;
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// A key of a row: a flat row of ori_kv (cmp = false) or of cmp_kv (cmp = true).
struct Key {
  bool cmp = false;
  std::int64_t slot = 0;
};

// Row t's keys in the reference order (ORI by position, then CMP in list / entry order). Under a Bug, keys outside
// the validated table coverage are dropped (a buggy kernel reading unmapped blocks is not modelled).
void row_keys(const Case& c, const Params& p, std::int64_t t, Bug bug, std::vector<Key>& keys);

// One element (flat index into out) of a kernel with `bug`, rounded to bf16, and its bound (the Stage::hypotheses).
std::optional<Hypothesis::Value> element(const Case& c, const Params& p, Bug bug, std::int64_t flat);

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the CUDA row engine, same bits
#endif
Expected run(const Case& c, const Params& p, Bug bug, int threads);  // the CPU reference with `bug`
// The reference on the row engine of `backend` (cpu.cpp; engines/sparse_attn/sparse_attn_rows.hpp: the same bits on
// both).
Expected run_on(const Case& c, const Params& p, Bug bug, int threads, Backend backend);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::attn::v4_sparse
