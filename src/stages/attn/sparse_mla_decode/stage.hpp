// attn.sparse_mla_decode — FlashMLA flash_mla_with_kvcache, sparse fp8 path (spec v32 §6.2, cache layout §6.3
// `mla_fp8_656`): per batch b, query token s and head h, over the valid indices V = {indices[b][s][p] != -1 :
// p < topk_length[b]} (index = page * page_size + offset; duplicates counted), with the key dequantized as the
// kernel does and z_t = softmax_scale * q[b,s,h,:] . k_t (576 dims):
//   k_t[d < 512] = bf16(bf16(e4m3(code_d)) * bf16(scale_{d/128}))   (dequant bf16_scale: __nv_bfloat162 multiply)
//               or bf16(fl32(e4m3(code_d) * scale_{d/128}))          (dequant f32_scale: the torch tests' dequantize)
//   k_t[512..575] = the stored bf16 k_pe
//   out[b,s,h,:] = sum_t softmax(z)_t k_t[:512] (x 1/(1 + e^(sink_h - lse)) with attn_sink)   -> bf16 once
//   lse[b,h,s]   = ln sum_t e^(z_t) (natural in every version)                                 -> fp32 once
// Rows without a valid index: out 0, lse +inf. An index other than -1 outside [0, num_blocks*page_size) within the
// batch's topk_length is a structural error of the input (the SM90 kernel reads out of bounds): parse() reports it,
// nothing reads it. Positions past topk_length (extra_topk_length) are never read, whatever they hold.
// The arithmetic and the error bounds: src/engines/sparse_attn/sparse_attn.hpp.
// DeepSeek-V4 (FlashMLA "MODEL1", spec v4 §9): attr layout = model1_fp8_584 (layouts/mla_kcache.hpp), d_qk = 512
// (448 e4m3 NoPE dims with 7 e8m0 tile scales, 64 bf16 RoPE), keys = values = all 512 dims,
//   k_t[d < 448] = bf16(bf16(e4m3(code_d)) * bf16(2^(e_{d/64} - 127)))   (exact for the power-of-two scales)
// and an optional second KV scope attended in the same softmax: extra_k_cache (same layout, its own page size),
// extra_indices_in_kvcache [b, s_q, extra_topk] (-1 invalid), extra_topk_length [b]; the keys are the main scope's
// valid indices then the extra scope's (FlashMLA: compressed entries + the sliding window, e.g.).
#pragma once
#include <cstring>

#include "layouts/kv_records.hpp"
#include "layouts/mla_kcache.hpp"
#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "stage/stage.hpp"
#include "engines/sparse_attn/head_out.hpp"
#include "engines/sparse_attn/mla_hypotheses.hpp"

namespace dsa::attn::sparse_mla_decode {

struct Params : dsa::Params {
  double softmax_scale = 0;
  bool bf16_scale = true;  // dequant attr
  Conventions cv;
  layouts::MlaKCache layout;
  bool model1 = false;
  layouts::Model1KCache m1, m1_extra;  // main and extra scope (MODEL1)
  bool extra = false;
  // KV records (layouts/kv_records.hpp): the main cache's record and the extra scope's (FlashMLA's pairs (V41, V41),
  // (V41, V41_FP4); the other records with themselves); nullptr for mla_fp8_656 / model1_fp8_584.
  layouts::KvRecord rec, xrec;
  std::int64_t num_sms = 132;  // attr num_sms: the flashmla-sm90 emulation's split-KV schedule
  bool misread_v32_no_rope = false;  // B56 (the selftest's mutant): a 528-byte row read as 512 e4m3 + 4 fp32 scales
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// The key (dim() values, exact: the record's dequant) of slot `slot` of a KV record cache.
inline void dequant_key_record(const std::uint8_t* cache, const layouts::KvRecord& r, std::int64_t slot, double* k) {
  float v[576];
  layouts::load_record(r, cache, slot, v);
  for (int d = 0; d < r.f->dim(); ++d) k[d] = static_cast<double>(v[d]);
}

// B56: the sgl-project FlashMLA fork's V3.2-no-RoPE record (512 e4m3 codes + 4 fp32 tile scales of 128 dims) read
// from a 528-byte cache at record stride: k[d] = bf16(e4m3(code_d) * bf16(scale_{d/128})).
inline void dequant_key_v32_no_rope(const std::uint8_t* cache, std::int64_t slot, double* k) {
  const std::uint8_t* rec = cache + slot * 528;
  for (std::int64_t j = 0; j < 4; ++j) {
    float s;
    std::memcpy(&s, rec + 512 + 4 * j, 4);
    num::e4m3_times_scale_bf16(rec + j * 128, 128, num::round_to_bf16(s), k + j * 128);
  }
}

// The kernel's dequantized key (576 values) of one cache record.
inline void dequant_key(const std::uint8_t* rec, bool bf16_scale, double* k) {
  using L = layouts::MlaKCache;
  const layouts::MlaToken tok{rec};
  for (std::int64_t j = 0; j < L::kTiles; ++j) {
    const float s = bf16_scale ? num::round_to_bf16(tok.scale(j)) : tok.scale(j);
    num::e4m3_times_scale_bf16(rec + j * L::kTile, L::kTile, s, k + j * L::kTile);  // code(d) = rec[d]
  }
  for (std::int64_t r = 0; r < L::kRope; ++r) k[L::kNope + r] = static_cast<double>(num::bf16_to_f32(tok.rope_bits(r)));
}

// The MODEL1 key (512 values) of slot `slot` of cache bytes `cache`.
inline void dequant_key_model1(const std::uint8_t* cache, const layouts::Model1KCache& m, std::int64_t slot, double* k) {
  using M = layouts::Model1KCache;
  const std::uint8_t* tok = cache + m.token_offset(slot);
  const std::uint8_t* sc = cache + m.scale_offset(slot);
  for (std::int64_t j = 0; j < M::kTiles; ++j) {
    num::e4m3_times_scale_bf16(tok + j * M::kTile, M::kTile, num::round_to_bf16(layouts::e8m0_to_f32(sc[j])), k + j * M::kTile);
  }
  for (std::int64_t r = 0; r < M::kRope; ++r) {
    std::uint16_t b;
    std::memcpy(&b, tok + M::kNope + 2 * r, 2);
    k[M::kNope + r] = static_cast<double>(num::bf16_to_f32(b));
  }
}

// The reference on the row engine of `backend` (cpu.cpp; engines/sparse_attn/sparse_attn_rows.hpp: the same bits on
// both): the rows' keys and values, the outputs and their bounds.
Expected run(const Case& c, const Params& p, const RefOptions& opt, Backend backend);
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
// Reader bugs that change the whole case (mutants.cpp; also the hypotheses of stage.cpp): a kernel ignoring the extra
// KV scope (the case without it); the 352-byte record's scales read in natural order (the cache rewritten so that the
// correct reader sees what that reader sees); a MODEL1 cache read as 584-byte AoS records (likewise).
void drop_extra_scope(Case& c);
void scales_352_unpermuted(Tensor& k_cache);
void model1_read_as_aos(Tensor& k_cache);
// The Stage::hypotheses' view of element f of out / lse (engines/sparse_attn/mla_hypotheses.hpp).
bool locate(const Case& c, const dsa::Params& p, const std::string& tensor, std::int64_t f, MlaElement& e);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the CUDA row engine, same bits
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::attn::sparse_mla_decode
