// v4.indexer_prolog — what feeds the DeepSeek-V4 Ascend indexer (spec v4 §3.1-3.4; seed 004 indexer_select_qli /
// _indexer_qkv_prepare, device_op.py indexer_quantize_query / prepare_dsa_indexer_weights / indexer_quant_scatter):
//   query:   (q8, qs) = dynamic_quant_int8 of every (token, head) row of the rotated bf16 query [T, H, D] (the
//            output of RoPE + Hadamard), q_scale = fp16(qs) (RNE)
//   weights: A3 head weights w16 = fp16(bf16(fl32(w * fl32(0.011048543456039806)))) of the bf16 weights_proj output
//   key:     (k8, ks) = dynamic_quant_int8 of every indexer-compressor row k [R, D]; k8 and fp16(ks) scattered into
//            the PA_BSND caches at slot_mapping ([block, offset] pairs, A3; or flat slots); a negative block (vLLM's
//            padding [-1, bs-1]) is skipped, as npu_scatter_nd_update_v2 skips linear indices outside the cache
// dynamic_quant_int8 (the A2/A3 kernel for bf16 input, spec §3.4): xf = float(x) (exact); amax = max |xf|;
//   scale = fl32(amax * fl32(1/127)) (a multiply, not amax / 127); inv = fl32(127 / amax); q = rint(fl32(xf * inv))
//   (half to even), an int8 in [-127, 127].
// amax = 0 (an all-zero row) is a named option, attr amax_zero: `scale1` = ops-nn's golden.py (scale := 1, codes 0),
// `scale0` = the kernel's arithmetic (scale 0 * (1/127) = 0; inv = inf, 0 * inf = NaN, whose int8 cast is taken as 0).
// A NaN in a row: amax, scale and fp16 scale NaN (0x7FFF), every code of the row 0. An inf: amax and scale inf,
// inv = 0, codes x * 0 = 0 (inf * 0 = NaN, cast to 0). Everything is exact: bytes comparators.
//
// Attr kernel = vllm-cuda (default ascend-a3): vLLM's CUDA DeepSeek-V4 fp8 indexer q path, fused_indexer_q_rope_quant's
// FP8 branch (spec v4 §10 "Indexer q"; core.hpp vllm_q_row has the arithmetic and the acceptance): inputs index_q
// (bf16 [T, H, 128]), positions ([T]), cos_sin_cache ([P, 64] fp32 or bf16: cos 32 | sin 32 per position) and
// index_weights ([T, H]); outputs q_fp8 (e4m3 [T, H, 128]) and weights_out (fp32 [T, H]), both byte-exact except
// where Triton's approximate log2 / the fp32 RoPE can flip a value (bounded, derived-bound; 0 = exact required).
// attrs softmax_scale and head_scale are the fold's factors (absent: head_dim^-0.5, n_head^-0.5). No Hadamard.
//
// The query path may start one step earlier, from `q_pre` = the wq_b output [T, H, D] bf16 and the per-token RoPE
// table `rope_cos` / `rope_sin` f32 [T, 64] (the Ascend table, interleave-duplicated: cos[2i] = cos[2i+1]) or
// [T, 32]: output `q_rot` (bf16 [T, H, D]) =
//   r = bf16(RoPE_interleaved(x) on the last 64 dims) (fp32 x*cos - y*sin / y*cos + x*sin; the nope dims as given),
//   attr hadamard=ascend (vLLM-Ascend rotate_activation): h = bf16(r @ H^T) (cube: fp32 accumulation, order unknown),
//     q_rot = bf16(fl32(h * fl32(128^-0.5)));
//   attr hadamard=fwht (the reference model): h = the fp32 FWHT of r (fixed butterfly order), q_rot =
//     bf16(fl32(h * fl32(128^-0.5))).
// The kernel's fp32 RoPE (product/FMA order unknown: error <= 3 2^-24 (|x c| + |y s|)) and the cube's fp32 sum
// (g(D-1, 2^-24) sum |r|, 0 when every partial sum is exact: all inputs multiples of 2^m and sum |r| < 2^(m+24)) can
// move a value across a bf16 rounding boundary. The reference computes each value exactly
// and rounds it at the kernel's rounding points; where the kernel's error interval around an exact value straddles a
// boundary, the possible outputs are carried on as an interval to the end. q_rot is judged against the reference
// with that per-element bound (policy derived-bound; 0 = the value is certain, most elements): a value outside it
// FAILs. q_int8 / q_scale are then judged as the quant of the dumped q_rot (the kernel's own intermediate: required
// with q_pre), so a wrong rotation is reported on q_rot and a wrong quant on q_int8, each bit for bit.
#pragma once
#include <cstdint>
#include <functional>

#include "stage/stage.hpp"
#include "stages/v4/indexer_prolog/core.hpp"  // the per-row math (DSA_HD), AmaxZero, HadamardKind, Bug

namespace dsa::v4::indexer_prolog {

struct Params : dsa::Params {
  bool vllm = false;  // attr kernel = vllm-cuda: the fp8 indexer q path (core.hpp vllm_q_row) instead of the A3 paths
  bool mxfp4 = false;  // vllm-cuda with attr q_format = mxfp4: the MXFP4 q path of DeepSeek-V4.1 (cpu.cpp run_vllm_mxfp4)
  double softmax_scale = 0, head_scale = 0;  // vllm-cuda's weight fold (fp32 in the kernel; parse derives absent ones)
  AmaxZero amax_zero = AmaxZero::scale1;
  bool pairs = true;  // slot_mapping as [block, offset] pairs (else flat slots)
  HadamardKind hadamard = HadamardKind::ascend;
  std::int64_t nblk = 0, bs = 0, D = 0;
};

// The q path from q_pre: one head row of D bf16 values (D a power of two >= 64) with its token's cos/sin (rope_dim/2
// values each), writes the reference q_rot bf16 bits and each element's bound (0 = certain): core.hpp's rope_row,
// row_stats and rot_elem in sequence (the CUDA backend runs the same three).
void rotate_row(const std::uint16_t* x, std::int64_t D, const float* cos_v, const float* sin_v, HadamardKind kind,
                std::uint16_t* out, double* bound, Bug bug = Bug::none);
// Flat cache slot of key row r, or -1 (skipped).
std::int64_t slot_of(const Case& c, const Params& p, std::int64_t r);

Expected cpu(const Case& c, const Params& p, const RefOptions& opt);
#ifdef DSA_CUDA_BACKEND
Expected cuda(const Case& c, const Params& p, const RefOptions& opt);  // cuda.cpp: the row loops on the device
#endif
// The reference with `bug`, its heavy row loops on the CPU (OpenMP).
Expected run(const Case& c, const Params& p, Bug bug, int threads);

// The heavy row loops of the reference: the CPU's (run, with its bug) or the device's (cuda.cpp: cuda.cu, Bug::none).
//   rotate   the q_pre path: pre [T*H, D] bf16 bits, cs / sn [T, 32] (each token's 32 cos / sin values) -> out
//            [T*H, D] bf16 bits (the reference q_rot) and bound [T*H, D] (rotate_row of every row)
//   quant    dynamic_quant_int8 of rows x [R, D] bf16 bits -> codes [R, D], scales [R] (fp16 bits, scale_fp16)
//   weights  a3_weight of n bf16 values -> fp16 bits
struct RowLoops {
  std::function<void(const std::uint16_t* pre, std::int64_t T, std::int64_t H, std::int64_t D, const float* cs, const float* sn,
                     std::uint16_t* out, double* bound)>
      rotate;
  std::function<void(const std::uint16_t* x, std::int64_t R, std::int64_t D, std::int8_t* codes, std::uint16_t* scales)> quant;
  std::function<void(const std::uint16_t* w, std::int64_t n, std::uint16_t* out)> weights;
  //   vq       kernel vllm-cuda: vllm_q_row of every (token, head) row: x [T*H, D] bf16 bits, cs / sn [T, 32], w [T*H]
  //            fp32 -> codes [T*H, D] e4m3, bound [T*H, D], wout [T*H] fp32, wbound [T*H]
  std::function<void(const std::uint16_t* x, std::int64_t T, std::int64_t H, std::int64_t D, const float* cs, const float* sn,
                     const float* w, float sm, float hs, std::uint8_t* codes, double* bound, float* wout, double* wbound)>
      vq;
};
// cpu.cpp: the reference with its row loops run by `loops`; the host keeps the RoPE rows, the packaging and the cache
// scatter (both backends).
Expected run_with(const Case& c, const Params& p, const RowLoops& loops);
std::vector<golden::Generator> generators();
std::vector<golden::GoldenSpec> goldens();
std::vector<golden::GoldenSpec> selftest_cases();
std::vector<Mutant> mutants();

}  // namespace dsa::v4::indexer_prolog
