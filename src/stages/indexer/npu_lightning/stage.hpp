// indexer.npu_lightning — the Ascend V3.2 lightning indexer torch_npu.npu_lightning_indexer (spec v4 §5, last bullet;
// seed 000 Indexer forward_npu and do_npu_cp_balance_indexer): bf16 (or fp16) query [T, H, D] TND, key cache
// PA_BSND [nblk, bs, 1, D] of the same dtype, head weights [T, H] (bf16, fp16 or fp32), sparse_mode 3, cmp_ratio 1,
// sparse_count 2048. For query row t of request b at position p (p = kv_len - q_len + i, see ascend_li.hpp), keys
// j < nvis = (p + 1) // cmp_ratio at block_table[b][j / bs], slot j % bs:
//   score_j = sum_h w[t,h] * relu(q[t,h,:] . k_j)
//   sparse_indices[t, 0, :] = the top sparse_count j by score, descending, -1 padded; all -1 when nvis <= 0.
// The reference: every product exact in f64, the dots and the head sum in one fixed order in f64. The kernel's
// rounding is covered by a rigorous bound u_j per candidate (attr variant):
//   ascend-a3 (A2/A3, ops-transformer lightning_indexer): the cube's fp32 dot (order inside the cube unknown), ReLU in
//     the Fixpipe, fp32 weight multiply (bf16/fp16 weights cast exactly), head sum in fp32 as 16 lanes (lane r adds
//     heads r, r+16, r+32, r+48 in turn) then a tree 8/4/2/1: every result is a sum tree of depth
//     m = H/16 - 1 + 4 (7 for 64 heads); the fp32 score is the sort key.
//   ascend-950: head sum in an unknown order (m = H - 1) and the score rounded to bf16 before the top-k (the arch35
//     variants that sort bf16 keys).
//   e_h = (g(D-1, 2^-24) + g(D-1, 2^-53)) A_h,  A_h = sum_d |q_hd k_jd|      (dot error, kernel + reference)
//   W   = sum_h |w_h| (r_h + e_h)                                         (r_h = relu of the f64 dot)
//   u_j = sum_h |w_h| e_h + (2^-24 + 2^-53) W + (g(m, 2^-24) + g(H-1, 2^-53)) W (1 + 2^-24) + (D H + 2 H + 2) 2^-149
//   ascend-950: u_j += 2^-8 (|score_j| + u_j)
// times (1 + 2^-20) for the bound's own rounding. The top-k comparator accepts either pick among candidates whose
// bands overlap (exact and near-ties), nothing else. Ties: Sort32 puts the lower index first; MrgSort's rule
// between its queues is not documented (the band accepts both orders of tied candidates).
// Context parallelism (attr cp_split=prev_next): the query rows are split at ceil(T / 2) (torch.split(q, (T+1)//2)):
// the first half is one call with actual_seq_lengths_query / _key, the second one with the *_next tensors. Input
// `positions` [T] (the rows' global positions, provenance) makes the reference the unsplit call: each row sees
// (positions[t] + 1) // cmp_ratio keys whatever the metadata says, so a split whose metadata mixes rank-local and
// global lengths (B45) fails, and the metadata's own positions are reported beside the verdict when they differ.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "stage/stage.hpp"
#include "engines/ascend_li/ascend_li.hpp"
#include "stages/indexer/npu_lightning/core.hpp"

namespace dsa::indexer::npu_lightning {

// Known bugs the selftest mutants reproduce through the reference's own code path (never set by a dump).
enum class Bug { none, relu_after_weighting, weights_ignored };

struct Params : dsa::Params {
  std::int64_t k = 2048;  // sparse_count
  std::int64_t T = 0, H = 0, D = 0;
  engines::ascend_li::Geometry g;
  bool cp = false;         // cp_split=prev_next
  bool a950 = false;       // variant=ascend-950
};

// The rows of the case: from the metadata (one call, or the two CP halves), positions overridden by inputs/positions.
std::vector<engines::ascend_li::Row> rows_of(const Case& c, const Params& p, bool use_positions = true);
// The metadata's calls (one, or the CP halves).
std::vector<engines::ascend_li::Call> calls_of(const Params& p);

// The per-candidate constants of core.hpp for this case (Bug::none).
core::Consts consts(const Params& p);

// The score job of a case (cpu.cpp): the rows, the [T, H] weights widened exactly (all 1 under Bug::weights_ignored),
// the pointers and constants score_thread reads (host pointers; cuda.cu binds device copies), and the score / bound
// buffers [T, C] it fills.
struct Job {
  std::shared_ptr<const std::vector<engines::ascend_li::Row>> rows;
  engines::ascend_li::PagedRowsHost h;
  core::ScoreJob job;
};
Job job_of(const Case& c, const Params& p, Bug bug = Bug::none);
// The reference once the job's scores and bounds are filled: the top-k selection (engines::ascend_li::
// topk_from_scores: selection, k-th values, index maps).
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

}  // namespace dsa::indexer::npu_lightning
