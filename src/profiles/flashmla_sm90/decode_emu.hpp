// The `flashmla-sm90` emulation of FlashMLA's sm90 sparse fp8 decode (flash_mla_with_kvcache: the split-KV scheduler
// get_decoding_sched_meta, sm90/decode/sparse_fp8/splitkv_mla.cuh and the combine kernel @9241ae3, --use_fast_math)
// as reference/flashmla_sm90.py's sparse_decode computes it: 100 % of out / lse and of the split partials (o_accum,
// lse_accum) of 24 real captures (docs/research_flashmla_sm90.md).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dsa::profiles::flashmla_emu {

// One flash_mla_with_kvcache call (sparse, fp8 cache). The kernel's dequantized keys come from `key` (scope 0: the
// main cache, 1: the extra scope; slot = page * page_size + offset; d_qk values, exact: bf16(bf16(e4m3) *
// bf16(scale))). Index -1 is invalid (its key is never read); MODEL1 also masks positions past topk_length.
struct DecodeCall {
  std::int64_t b = 0, s_q = 0, h_q = 0, d_qk = 0;  // d_qk 576: V3.2 (656-byte cache); 512: MODEL1 (584-byte cache)
  const std::uint16_t* q = nullptr;                // [b, s_q, h_q, d_qk] bf16 bits
  std::function<void(int scope, std::int64_t slot, double* k)> key;
  std::vector<std::int64_t> idx;                   // [b, s_q, topk]
  std::int64_t topk = 0;
  std::vector<std::int64_t> length;                // [b] topk_length (MODEL1), empty: none
  std::vector<std::int64_t> xidx;                  // [b, s_q, extra_topk] (MODEL1 extra scope), empty: none
  std::int64_t xtopk = 0;
  std::vector<std::int64_t> xlength;               // [b] extra_topk_length, empty: none
  const float* sink = nullptr;                     // [h_q] or null
  float sm_scale = 0;                              // the fp32 argument
  std::int64_t num_sms = 132;                      // the GPU's SMs: num_sm_parts = max(num_sms / s_q / (h_q / 64), 1)
};

// The split-KV schedule (get_decoding_sched_meta): one entry per SM part, and num_splits [b + 1] (cumulative).
struct SchedPart {
  std::int64_t begin_req, begin_block, begin_split, end_req, end_block;
  bool first_split, last_split;
};
void decode_schedule(const DecodeCall& c, std::vector<SchedPart>& parts, std::vector<std::int64_t>& num_splits);

// out [b, s_q, h_q, 512] bf16 bits, lse [b, s_q, h_q] (the kernel's buffer; natural log, sink-exclusive). Optional
// o_accum / lse_accum receive the split partials ([splits, s_q, h_q, 512] / [splits, s_q, h_q]). False (nothing
// written) where the kernel would refuse the call or the model does not apply; `why` says which.
bool decode(const DecodeCall& c, int threads, std::uint16_t* out, float* lse, std::string& why,
            std::vector<float>* o_accum = nullptr, std::vector<float>* lse_accum = nullptr);

}  // namespace dsa::profiles::flashmla_emu
