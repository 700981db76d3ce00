// v4.compressor — the DeepSeek-V4 KV compressor (spec v4 §2, §5, §6; the Ascend `compressor` op of seed 004, TND
// layout). Per request b (tokens cu_seqlens[b]..cu_seqlens[b+1], positions p = start_pos[b] + i):
//   KV_p = x_p . wkv^T, S_p = x_p . wgate^T + ape[p mod r]           [coff*D] each (or given as kv_proj/score_proj)
//   the state row of p (KV_p | S_p, fp32) is written through state_block_table (cache_mode 1: block
//   table[b][p / bs], offset p % bs; cache_mode 2: ring slot q = p mod (coff*r), block table[b][q / bs], offset
//   q % bs); block id 0 = do not write (reads do not check).
//   Entry j is emitted when (p+1) % r == 0. Its rows: coff = 2: the previous group (tokens jr-r..jr-1, a-half
//   [0, D); missing for j = 0: weight 0) then the current group (jr..jr+r-1, b-half [D, 2D)); coff = 1: the current
//   group, [0, D). Tokens before start_pos come from state_cache_in.
//   C[c] = sum_rows softmax_rows(S[., c]) KV[., c] (per channel, over rows);
//   variant ascend-a3: y = C / sqrt(sum C^2 / D + eps) * gamma, RoPE (interleaved, last rope_dim dims, the given
//     cos/sin row = position jr), one RNE cast to bf16; rotate: bf16(bf16(y @ H128) * fl32(128^-0.5)).
//   variant ref (DeepSeek inference code): C -> bf16, y = bf16(C * rsqrt(mean C^2 + eps) * gamma), RoPE -> bf16;
//     main compressor: FP8 e4m3 QAT (ue8m0, blocks of 64) of the nope dims; rotate: Hadamard (fp32, scale) -> bf16
//     -> FP4 e2m1 QAT (ue8m0, blocks of 32).
//   variant vllm-cuda: ascend-a3's fp32 pipeline (rsqrt form: the same real value), then the ref's FP8 QAT of the
//     nope dims (the value its fp8 cache holds).
//   model v41 (spec v41 §4): r 1 or 2, coff 1, no APE (ape absent), r 1 without a gate (wgate / score_proj absent: the
//     softmax of one row is 1); the pooled value rounded to bf16 before the norm when pooled_bf16 (ref, and r 1's
//     bf16 Linear); then ref: bf16 norm and RoPE, NVFP4 QAT (blocks of 16, e4m3 scale e4m3(max(amax, 6 2^-9) / 6))
//     of all D dims from the bf16 values; vllm-cuda: the fp32 pipeline and NVFP4 (vLLM's rule, div_rn) of the
//     unrounded fp32 RoPE result; ascend-a3 (compressor_v2): one bf16 cast. cmp_kv = e2m1 * scale (exact in bf16).
// Rows are packed request by request in increasing j; rope_sin/rope_cos hold one row per output row (the
// compressor_metadata gather of position jr); rows past the emitted count are padding (undefined, never compared).
//
// The reference evaluates in fp64 in one fixed order (det_exp) and rounds at the variant's rounding points. The
// kernel's fp32 GEMM order (NPU cube), its softmax reduction order over 8 / 128 rows and its exp are unknown
// (spec §8 items 6, 13), so cmp_kv and the written state rows are judged by a derived per-element bound (policy
// `derived-bound`): GEMM (H+2) 2^-24 sum|x||w|; softmax weights perturbed by e^(2 dS) - 1; the fp32 evaluation
// 2^-20 + 2 g(rows) of sum w|kv|; the norm's first-order propagation; RoPE; and at every rounding point to bf16 /
// fp8 / fp4 the distance between the two roundings of values that far apart (the exact candidate set for QAT
// blocks, whose ue8m0 scale can itself flip). State rows read from state_cache_in are exact inputs.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engines/v4_compress/pool.hpp"
#include "stage/stage.hpp"

namespace dsa::v4::compressor {

enum class Variant { ascend_a3, ref, vllm_cuda };
// Known bugs the selftest mutants reproduce through the same code path (never set by a dump).
enum class Bug { none, halves_swapped, prev_not_masked, softmax_over_channels, ring_off_by_one };

struct Params : dsa::Params {
  std::int64_t r = 4, coff = 2, D = 512, C2 = 1024, H = 0, rope = 64, bs = 8, maxblk = 0, nblk = 0, B = 0, T = 0, R = 0;
  double eps = 1e-6;
  bool rotate = false, have_x = true;
  // DeepSeek-V4.1 (attr model = v41, spec v41 §4): ratios 1 / 2, no overlap; the entry quantized to NVFP4 (ref: from
  // the bf16 value, vllm-cuda: from the unrounded fp32 RoPE result; ascend-a3: bf16 out, no quantization).
  bool v41 = false;
  bool pooled_bf16 = false;            // C -> bf16 before the norm (ref; V4.1 ratio 1: the bf16 Linear); attr pooled_bf16
  bool have_gate = true, have_ape = true;  // ratio 1 has no gate; V4.1 has no APE
  std::int64_t ring = 0;               // cache_mode 2: ring rows per request (attr ring_rows; default coff * r)
  int cache_mode = 1;
  Variant variant = Variant::ascend_a3;
  std::string tolerance_policy() const override { return "derived-bound"; }
};

// State slot (block, offset) of position p of request b; block < 0 when the table has no entry there.
struct Slot {
  std::int64_t block = -1, offset = 0;
};
Slot state_slot(const Params& p, const std::int32_t* table_row, std::int64_t pos, Bug bug = Bug::none);

// One window row (engines/v4_compress): kv, score over the C2 channels (values and bounds), or missing (weight 0).
using RowRef = engines::v4_compress::RowRef;

// Pools the rows into C[D] with bounds eC[D] (engines/v4_compress, with the stage's pool bugs).
void pool(const Params& p, const std::vector<RowRef>& rows, Bug bug, double* C, double* eC);
// The variant's post-processing of one entry: C, eC -> output values y[D] (bf16-representable) and bounds ey[D].
void finish(const Params& p, const double* C, const double* eC, const std::uint16_t* gamma_bf16, const float* cos_row,
            const float* sin_row, double* y, double* ey);

// The whole step (all requests); also used by the mutants with a bug.
struct StepResult {
  Tensor cmp_kv, cmp_m, cmp_def, state, state_m;
  std::vector<std::int64_t> row_req, row_entry;  // output row -> request, compressed index j (-1 = padding)
};
// The projections of this step's tokens x [T, H] (bf16 bits) done elsewhere: KV = x . wkv^T and S = x . wgate^T, each
// element the fp64 fma chain over h in increasing order that the CPU micro-kernel keeps; for each token chunk,
// emit(t0, nt, Sk, Sg) with Sk / Sg [nt, C2] row-major (cuda.cpp passes project_cuda).
using ProjectEmit = std::function<void(std::int64_t t0, std::int64_t nt, const double* Sk, const double* Sg)>;
using Projector = void (*)(const std::uint16_t* x, std::int64_t T, std::int64_t H, const std::uint16_t* wkv, const std::uint16_t* wgate,
                           std::int64_t C2, const ProjectEmit& emit);
// cpu.cpp: the step with the projections on the CPU micro-kernel, or by `project` when given.
StepResult run_step(const Case& c, const Params& p, Bug bug, int threads, Projector project = nullptr);
// The reference of a step (cpu.cpp; both backends): cmp_kv and state_cache with their bounds.
Expected package(const Params& p, StepResult s);


Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the projections on the GPU, same bits
#endif
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v4::compressor
