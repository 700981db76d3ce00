// attn.sparse_mla_prefill — FlashMLA flash_mla_sparse_fwd (spec v32 §6.1): per query row i and head h, over the valid
// indices V_i = {indices[i][0][p] : p < topk_length[i], 0 <= idx < s_kv} (duplicates counted), with
// z_t = sm_scale * q[i,h,:] . kv[t,0,:] over all d_qk (576 or 512) dims:
//   out[i,h,:512]   = sum_t softmax(z)_t kv[t,0,:512]  (x 1/(1 + e^(sink_h - lse)) with attn_sink)   -> bf16 once
//   max_logits[i,h] = max_t z_t                    (x log2 e when lse_base = 2)                      -> fp32 once
//   lse[i,h]        = ln sum_t e^(z_t)             (x log2 e when lse_base = 2)                      -> fp32 once
// Rows without a valid index: out 0, max_logits -inf, lse +inf (lse_base e, FlashMLA 2026+) or -inf (lse_base 2,
// the 2025 release). The arithmetic and the error bounds: src/engines/sparse_attn/sparse_attn.hpp.
#pragma once
#include "stage/stage.hpp"
#include "engines/sparse_attn/head_out.hpp"
#include "engines/sparse_attn/mla_hypotheses.hpp"

namespace dsa::attn::sparse_mla_prefill {

struct Params : dsa::Params {
  double sm_scale = 0;
  Conventions cv;
  std::int64_t dv = 512;
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// The reference on the row engine of `backend` (cpu.cpp; engines/sparse_attn/sparse_attn_rows.hpp: the same bits on
// both): the rows' keys and values, the outputs and their bounds.
Expected run(const Case& c, const Params& p, const RefOptions& opt, Backend backend);
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
// The Stage::hypotheses' view of element f of out / lse / max_logits (engines/sparse_attn/mla_hypotheses.hpp).
bool locate(const Case& c, const dsa::Params& p, const std::string& tensor, std::int64_t f, MlaElement& e);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the CUDA row engine, same bits
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::attn::sparse_mla_prefill
