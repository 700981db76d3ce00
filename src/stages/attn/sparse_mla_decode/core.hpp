// attn.sparse_mla_decode — FlashMLA flash_mla_with_kvcache, sparse fp8 path (spec v32 §6.2, cache layout §6.3
// `mla_fp8_656`): per batch b, query token s and head h, over the valid indices V = {indices[b][s][p] != -1 :
// p < topk_length[b]} (index = page * page_size + offset; duplicates counted), with the key dequantized as the
// kernel does and z_t = softmax_scale * q[b,s,h,:] . k_t (576 dims):
//   k_t[d < 512] = bf16(bf16(e4m3(code_d)) * bf16(scale_{d/128}))   (dequant bf16_scale: __nv_bfloat162 multiply)
//               or bf16(fl32(e4m3(code_d) * scale_{d/128}))          (dequant f32_scale: the torch tests' dequantize)
//   k_t[512..575] = the stored bf16 k_pe
//   out[b,s,h,:] = sum_t softmax(z)_t k_t[:512] (x 1/(1 + e^(sink_h - lse)) with attn_sink)   -> bf16 once
//   lse[b,h,s]   = ln sum_t e^(z_t) (natural in every version)                                 -> fp32 once
// Rows without a valid index: out 0, lse +inf. An index other than -1 outside [0, num_blocks*page_size) is a
// structural error of the input (the SM90 kernel reads out of bounds): parse() reports it, nothing reads it.
// The arithmetic and the error bounds: src/stages/attn/common/sparse_attn.hpp.
#pragma once
#include "layouts/mla_kcache.hpp"
#include "numerics/formats.hpp"
#include "stage/stage.hpp"
#include "stages/attn/common/head_out.hpp"

namespace dsa::attn::sparse_mla_decode {

struct Params : dsa::Params {
  double softmax_scale = 0;
  bool bf16_scale = true;  // dequant attr
  Conventions cv;
  layouts::MlaKCache layout;
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// The kernel's dequantized key (576 values) of one cache record.
inline void dequant_key(const std::uint8_t* rec, bool bf16_scale, double* k) {
  using L = layouts::MlaKCache;
  const layouts::MlaToken tok{rec};
  for (std::int64_t j = 0; j < L::kTiles; ++j) {
    const float s = bf16_scale ? num::round_to_bf16(tok.scale(j)) : tok.scale(j);
    for (std::int64_t d = j * L::kTile; d < (j + 1) * L::kTile; ++d)
      k[d] = static_cast<double>(num::round_to_bf16(num::e4m3_to_f32(tok.code(d)) * s));
  }
  for (std::int64_t r = 0; r < L::kRope; ++r) k[L::kNope + r] = static_cast<double>(num::bf16_to_f32(tok.rope_bits(r)));
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::attn::sparse_mla_decode
