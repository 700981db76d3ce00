// deepgemm-sm90 emulation on the GPU (emulate_cuda.hpp). One thread per (row, key): the row's query codes and the
// block's 128 key codes in shared memory, each head's dot product by wgmma_chunk over decoded 32-element chunks (integers: exact in any order of
// threads), the head reduction by head_reduce_fn (fp32 with the kernel's contractions written out as fmaf; built
// with --fmad=false so nothing else contracts).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>

#include "backend/cuda.hpp"
#include "profiles/deepgemm_sm90/emulate_cuda.hpp"
#include "profiles/deepgemm_sm90/sm90_core.hpp"

namespace dsa::profiles::sm90 {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = 128;

struct EmuDev {
  int H = 0, D = 0;
  const std::uint8_t* q = nullptr;
  const float* w = nullptr;
  const std::uint8_t* kv = nullptr;  // ragged
  const float* ksc = nullptr;
  const std::uint8_t* cache = nullptr;  // paged, indexer_kcache_planar
  i64 ps = 1, page_bytes = 0, tw = 0;
  const std::int32_t* bt = nullptr;
  const i64 *lo = nullptr, *hi = nullptr, *col0 = nullptr, *batch = nullptr;
  i64 rows = 0, cols = 0;
  bool bf16 = false;
  void* out = nullptr;
};

__global__ void fill_kernel(void* out, i64 n, bool bf16) {
  const i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (bf16) static_cast<std::uint16_t*>(out)[i] = 0xFF80u;
  else static_cast<std::uint32_t*>(out)[i] = 0xFF800000u;
}

__global__ void __launch_bounds__(kThreads) emu_kernel(EmuDev e) {
  extern __shared__ std::uint8_t sh[];
  const int H = e.H, D = e.D, KS = D + 4;  // key stride: 4-byte words of consecutive threads in different banks
  std::uint8_t* qs = sh;                   // [H * D]
  std::uint8_t* qnan = qs + H * D;         // [H]
  std::uint8_t* ks = qnan + H;             // [kThreads * KS]
  for (i64 r = blockIdx.y; r < e.rows; r += gridDim.y) {
    const i64 lo = e.lo[r], hi = e.hi[r], j0 = lo + static_cast<i64>(blockIdx.x) * kThreads;
    if (j0 >= hi) continue;  // uniform per block
    __syncthreads();         // the previous row's shared data is no longer read
    for (int x = threadIdx.x; x < H * D; x += kThreads) qs[x] = e.q[r * H * D + x];
    __syncthreads();
    for (int h = threadIdx.x; h < H; h += kThreads) {
      bool nan = false;
      for (int d = 0; d < D; ++d) nan |= (qs[h * D + d] & 0x7F) == 0x7F;
      qnan[h] = nan;
    }
    const i64 j = j0 + threadIdx.x;
    float sc = 0.0f;
    bool knan = false;
    std::uint8_t* k = ks + threadIdx.x * KS;
    if (j < hi) {
      const std::uint8_t* src;
      if (e.cache) {
        const i64 page = e.bt[e.batch[r] * e.tw + j / e.ps], slot = j % e.ps;
        src = e.cache + page * e.page_bytes + slot * D;
        memcpy(&sc, e.cache + page * e.page_bytes + e.ps * D + slot * 4, 4);
      } else {
        src = e.kv + j * D;
        sc = e.ksc[j];
      }
      for (int d = 0; d < D; ++d) {
        k[d] = src[d];
        knan |= (src[d] & 0x7F) == 0x7F;
      }
    }
    __syncthreads();
    if (j < hi) {
      auto s = [&](int h) {
        if (qnan[h] || knan) return __int_as_float(0x7FC00000);  // a NaN code: NaN (fmaxf turns it into 0)
        std::int64_t T = 0;
        int u = 0;
        const std::uint8_t* qh = qs + h * D;
        for (int c0 = 0; c0 < D; c0 += 32) {
          std::int32_t as[32], ae[32], bs[32], be[32];
          for (int i = 0; i < 32; ++i) decode_code(qh[c0 + i], as[i], ae[i]), decode_code(k[c0 + i], bs[i], be[i]);
          wgmma_chunk(as, ae, bs, be, T, u);
        }
        return tu_to_f32(T, u);
      };
      const float x = head_reduce_fn(s, e.w + r * H, H, sc);
      const i64 f = r * e.cols + (j - e.col0[r]);
      const std::uint32_t b = out_bits(x, e.bf16);
      if (e.bf16) static_cast<std::uint16_t*>(e.out)[f] = static_cast<std::uint16_t>(b);
      else static_cast<std::uint32_t*>(e.out)[f] = b;
    }
  }
}

}  // namespace

void emulate_logits_cuda(const engines::logits::GpuLogitsJob& job, void* out) {
  const int H = job.H, D = job.D;
  const i64 R = job.rows, n_out = R * job.cols;
  const bool paged = job.cache != nullptr;
  const std::size_t vb = job.bf16 ? 2 : 4;
  auto up = [](const void* src, i64 n) {
    auto b = std::make_unique<cuda::Buffer>(static_cast<std::size_t>(std::max<i64>(n, 1)));
    if (n > 0) b->upload(src, static_cast<std::size_t>(n));
    return b;
  };
  cuda::Buffer d_out(static_cast<std::size_t>(std::max<i64>(n_out, 1)) * vb);
  if (n_out > 0) {
    fill_kernel<<<static_cast<unsigned>((n_out + 255) / 256), 256>>>(d_out.get(), n_out, job.bf16);
    cuda::check_last("deepgemm-sm90 emulation: fill");
  }
  i64 maxlen = 0;
  for (i64 r = 0; r < R; ++r) maxlen = std::max(maxlen, job.hi[r] - job.lo[r]);
  if (maxlen > 0) {
    const i64 page_bytes = job.page_size * (D + 4);
    auto d_q = up(job.q, R * H * D), d_w = up(job.w, R * H * 4);
    auto d_k = paged ? up(job.cache, job.num_pages * page_bytes) : up(job.kv, job.nkeys * D);
    auto d_sc = paged ? up(nullptr, 0) : up(job.kv_scale, job.nkeys * 4);
    auto d_bt = paged ? up(job.block_table, job.batches * job.table_width * 4) : up(nullptr, 0);
    auto d_lo = up(job.lo, R * 8), d_hi = up(job.hi, R * 8), d_col0 = up(job.col0, R * 8), d_batch = up(job.batch, R * 8);
    EmuDev e;
    e.H = H, e.D = D;
    e.q = static_cast<const std::uint8_t*>(d_q->get());
    e.w = static_cast<const float*>(d_w->get());
    if (paged) {
      e.cache = static_cast<const std::uint8_t*>(d_k->get());
      e.ps = job.page_size, e.page_bytes = page_bytes, e.tw = job.table_width;
      e.bt = static_cast<const std::int32_t*>(d_bt->get());
    } else {
      e.kv = static_cast<const std::uint8_t*>(d_k->get());
      e.ksc = static_cast<const float*>(d_sc->get());
    }
    e.lo = static_cast<const i64*>(d_lo->get());
    e.hi = static_cast<const i64*>(d_hi->get());
    e.col0 = static_cast<const i64*>(d_col0->get());
    e.batch = static_cast<const i64*>(d_batch->get());
    e.rows = R, e.cols = job.cols, e.bf16 = job.bf16;
    e.out = d_out.get();
    const std::size_t smem = static_cast<std::size_t>(H * D + H + kThreads * (D + 4));
    if (smem > 48 * 1024 && cudaFuncSetAttribute(emu_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess)
      cuda::check_last("deepgemm-sm90 emulation: shared memory");
    const dim3 grid(static_cast<unsigned>((maxlen + kThreads - 1) / kThreads), static_cast<unsigned>(std::min<i64>(R, 65535)));
    emu_kernel<<<grid, kThreads, smem>>>(e);
    cuda::check_last("deepgemm-sm90 emulation kernel");
  }
  d_out.download(out, static_cast<std::size_t>(n_out) * vb);
}

}  // namespace dsa::profiles::sm90
