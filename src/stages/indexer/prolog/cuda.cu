// indexer.prolog on the GPU: one thread per token for the k row, one per (token, head) for q, each running
// core.hpp's token_k / token_q_head — the definitions cpu.cpp runs (built with --fmad=false, IEEE division and
// sqrt): identical bits (dsa-check backend-diff). The RoPE rows come from the host (rope_rows: dumped table or YaRN).
#include <cstdint>

#include "backend/cuda.hpp"
#include "stages/indexer/prolog/cuda.hpp"

namespace dsa::indexer::prolog {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = 128;

unsigned blocks_for(i64 n) {  // grid-stride loops below: at most 65535 blocks
  const i64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

__global__ void k_kernel(TokenParams tp, i64 T, i64 Dh, i64 half, const std::uint16_t* k, const float* lw, const float* lb,
                         const float* cs, const float* sn, std::uint16_t* k_norm, std::uint16_t* k_rope, std::uint16_t* k_rot,
                         std::uint8_t* k_fp8, float* k_scale) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 t = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; t < T; t += stride)
    token_k(tp, Dh, k + t * Dh, lw, lb, cs + t * half, sn + t * half, k_norm + t * Dh, k_rope + t * Dh, k_rot + t * Dh, k_fp8 + t * Dh,
            k_scale + t);
}

__global__ void q_kernel(TokenParams tp, i64 T, i64 H, i64 Dh, i64 half, const std::uint16_t* q, const float* w, const float* cs,
                         const float* sn, float sm_scale, std::uint16_t* q_rope, std::uint16_t* q_rot, std::uint8_t* q_fp8,
                         float* q_scale, float* weights) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 th = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; th < T * H; th += stride) {
    const i64 t = th / H;
    token_q_head(tp, Dh, q + th * Dh, w[th], cs + t * half, sn + t * half, sm_scale, q_rope + th * Dh, q_rot + th * Dh,
                 q_fp8 + th * Dh, q_scale + th, weights + th);
  }
}

template <class P>
P* dev(const cuda::Buffer& b) {
  return static_cast<P*>(b.get());
}

}  // namespace

void prolog_cuda(const TokenParams& tp, i64 T, i64 H, i64 Dh, const std::uint16_t* q, const std::uint16_t* k, const float* w,
                 const float* ln_weight, const float* ln_bias, const float* cs, const float* sn, float sm_scale, const HostOut& out) {
  const i64 half = tp.rope_dim / 2;
  const auto n_q = static_cast<std::size_t>(T * H * Dh), n_k = static_cast<std::size_t>(T * Dh), n_th = static_cast<std::size_t>(T * H),
             n_t = static_cast<std::size_t>(T), n_cs = static_cast<std::size_t>(T * half), n_d = static_cast<std::size_t>(Dh);
  // inputs
  cuda::Buffer dq(n_q * 2), dk(n_k * 2), dw(n_th * 4), dlw(n_d * 4), dlb(n_d * 4), dcs(n_cs * 4), dsn(n_cs * 4);
  dq.upload(q, n_q * 2);
  dk.upload(k, n_k * 2);
  dw.upload(w, n_th * 4);
  dlw.upload(ln_weight, n_d * 4);
  dlb.upload(ln_bias, n_d * 4);
  dcs.upload(cs, n_cs * 4);
  dsn.upload(sn, n_cs * 4);
  // outputs
  cuda::Buffer q_fp8(n_q), q_scale(n_th * 4), k_fp8(n_k), k_scale(n_t * 4), weights(n_th * 4), k_norm(n_k * 2), k_rope(n_k * 2),
      k_rot(n_k * 2), q_rope(n_q * 2), q_rot(n_q * 2);
  if (T > 0) {
    k_kernel<<<blocks_for(T), kThreads>>>(tp, T, Dh, half, dev<const std::uint16_t>(dk), dev<const float>(dlw), dev<const float>(dlb),
                                          dev<const float>(dcs), dev<const float>(dsn), dev<std::uint16_t>(k_norm),
                                          dev<std::uint16_t>(k_rope), dev<std::uint16_t>(k_rot), dev<std::uint8_t>(k_fp8),
                                          dev<float>(k_scale));
    cuda::check_last("indexer.prolog k kernel");
  }
  if (T * H > 0) {
    q_kernel<<<blocks_for(T * H), kThreads>>>(tp, T, H, Dh, half, dev<const std::uint16_t>(dq), dev<const float>(dw),
                                              dev<const float>(dcs), dev<const float>(dsn), sm_scale, dev<std::uint16_t>(q_rope),
                                              dev<std::uint16_t>(q_rot), dev<std::uint8_t>(q_fp8), dev<float>(q_scale),
                                              dev<float>(weights));
    cuda::check_last("indexer.prolog q kernel");
  }
  q_fp8.download(out.q_fp8, n_q);
  q_scale.download(out.q_scale, n_th * 4);
  k_fp8.download(out.k_fp8, n_k);
  k_scale.download(out.k_scale, n_t * 4);
  weights.download(out.weights, n_th * 4);
  k_norm.download(out.k_norm, n_k * 2);
  k_rope.download(out.k_rope, n_k * 2);
  k_rot.download(out.k_rot, n_k * 2);
  q_rope.download(out.q_rope, n_q * 2);
  q_rot.download(out.q_rot, n_q * 2);
}

}  // namespace dsa::indexer::prolog
