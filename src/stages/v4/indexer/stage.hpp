// v4.indexer — the DeepSeek-V4 lightning indexer on Ascend A2/A3: npu_vllm_quant_lightning_indexer (spec v4 §3.5;
// seed 004 AscendDSAImpl._indexer_qli), int8 query and key cache, TND queries, PA_BSND key cache, sparse_mode 3,
// cmp_ratio 4. For query row t of request b (rows aq[b-1]..aq[b]-1 of the TND batch, aq = actual_seq_lengths_query,
// prefix sums without the leading 0; kv_len = actual_seq_lengths_key[b], the uncompressed token count):
//   position p = kv_len - q_len + i (i = row inside the request); visible compressed entries j < nvis = (p+1) // 4
//   (entry j = tokens 4j..4j+3 is complete at or before p); keys j at block_table[b][j / bs], slot j % bs.
//   wq[h]   = fp16(w16[t,h] * qs16[t,h])                       (vector unit, one RNE rounding of the exact product)
//   I[h,j]  = sum_d q8[t,h,d] * k8[j,d]                        (int32, exact)
//   s[h,j]  = fp16(relu(I[h,j]) * 2^-10)                       (Fixpipe DEQF16 with reluPre; 2^-10 never undone)
//   L[j]    = sum_h wq[h] * s[h,j]                             (fp16 x fp16 products, exact in fp32; fp32 sums)
//   score_j = fl32(L[j] * float(ks16[j]))
//   sparse_indices[t, 0, :] = the top sparse_count j by score, descending, ties -> lower j (Sort32), -1 padded; the
//   whole row -1 when nvis <= 0. Indices are per-request compressed-entry indices (not window offsets).
// The cube's fp32 summation order over the heads is not documented, so the reference scores L exactly (fixed
// order in fp64) and gives each candidate a rigorous bound u_j on the kernel's score: any-order fp32 summation
// g(H-1, 2^-24) sum|wq s| ks, the final fp32 multiply 2^-24 |score|, and the reference's own fp64 evaluation
// (g(H-1, 2^-53) sum|wq s| ks + 2^-53 |score|). The top-k comparator (tie-aware sets, order up to the bounds)
// decides with these bands: exact ties and near-ties inside the bound accept either pick, nothing else.
//
// Attr variant picks the scoring arithmetic (same visibility, index space and output):
//   ascend-a3 (above): int8 q/k, fp16 query_dequant_scale / key_dequant_scale / weights.
//   vllm-cuda: vLLM's CUDA path (spec v4 §10): q e4m3 [T,H,D] whose power-of-two scale is folded into the fp32
//     weights (no query_dequant_scale), k e4m3 with an fp32 power-of-two key_dequant_scale per cached row; the logits
//     of DeepGEMM fp8_mqa_logits / fp8_paged_mqa_logits, score_j = sum_h w_h relu(ks_j (q_h . k_j)), then a top-k
//     kernel. The products are exact in f64 (e4m3: <= 4 significant bits each) and so are the sums (multiples of
//     2^-18 below 2^32); the kernel's error is the Hopper fp8 WGMMA accumulation, bounded (policy sm90-fp8, 2^-10
//     of the magnitude, here taken as ks_j sum_h |w_h| sum_d |q_hd k_jd| >= the logits' relu-based M: a safe envelope)
//     plus its fp32 head sum g(H-1, 2^-24) and the reference's own f64 rounding.
//   ref-bf16: the DeepSeek-V4 reference model (inference/model.py Indexer, spec v4 §3.6): bf16 q/k/weights, every
//     op a bf16 tensor: I_h = bf16(fp32 dot), relu, p_h = bf16(w_h I_h), L = bf16(fp32 sum_h p_h). Bound per
//     candidate: e_h = g(D-1, 2^-24) A_h + 2^-8 (|I_h| + g A_h), |w_h| e_h + 2^-8 |w_h| (r_h + e_h) per product,
//     g(H-1, 2^-24) sum_h |p_h| for the sum, 2^-8 (|L| + u) for its bf16 rounding (ties are frequent: bands do the
//     work). The key scale is absent (the reference keeps bf16 keys).
// Attr sorted: 1 = the output is in descending score order (Ascend ops, torch.topk sorted=True); 0 = any order
// (top-k kernels that emit the set unsorted).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engines/ascend_li/ascend_li.hpp"
#include "stage/stage.hpp"
#include "stages/v4/indexer/core.hpp"

namespace dsa::v4::indexer {

// Known bugs the selftest mutants reproduce through the reference's own code path (never set by a dump).
enum class Bug { none, relu_after_weighting, no_key_scale, no_query_scale, no_2pow10, chunk_slots };

using core::Variant;

struct Params : dsa::Params {
  Variant variant = Variant::ascend_a3;
  bool sorted = true;
  std::int64_t k = 512;  // sparse_count
  std::int64_t T = 0, H = 0, D = 0;
  dsa::engines::ascend_li::Geometry g;  // requests, key cache, block table, cmp_ratio (4)
};
using dsa::engines::ascend_li::Row;

// The score job of a case (cpu.cpp): the rows, the per-(row, head) weights, the pointers and constants score_thread
// reads (host pointers; cuda.cu binds device copies), and the score / bound buffers [T, C] it fills.
struct Job {
  std::shared_ptr<const std::vector<Row>> rows;
  dsa::engines::ascend_li::PagedRowsHost h;
  core::ScoreJob job;
};
Job job_of(const Case& c, const Params& p, Bug bug = Bug::none);
// The reference once the job's scores and bounds are filled: the top-k selection (engines::ascend_li::
// topk_from_scores), plus sparse_values when the case has that output.
Expected finish(const Case& c, const Params& p, Job& j, int threads);

// The reference with a known bug (selftest), on the CPU.
Expected run(const Case& c, const Params& p, Bug bug, int threads);
Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the scores on the GPU
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v4::indexer
