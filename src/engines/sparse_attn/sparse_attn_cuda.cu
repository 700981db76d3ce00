// The sparse attention row engine on the GPU (sparse_attn_cuda.hpp). Built with --fmad=false (no contraction: each
// product and sum is the one the CPU code writes) and IEEE division / sqrt. Per chunk of rows:
//   kss     |k_t|^2 per (row, key): a sum over d in increasing order (RowEngine's key norms)
//   qk      S[r][h][t] = fma chain over d in increasing order (backend/chain_tile.cuh: 32 heads x 64 keys per block;
//           RowEngine: row_qk)
//   softmax one warp per (row, head): z = sm s, the max (ties to the lowest key: the CPU's strict `>` in key order),
//           max |z|, max |k|^2 (NaN sticky), |q|^2 in order, head_bounds / head_classify, p = det_exp(z - m), L summed
//           by one lane in key order, head_lse (sparse_attn_core.hpp)
//   pv      O and M = fma chains over the row's keys in order of p_t v_t[c] and p_t |v_t[c]| (chain_tile: 32 heads x
//           64 columns per block; RowEngine: row_pv)
//   finish  head_finish_one (O / L, M / L; NaN and lonely heads) per element, IEEE division as on the host
//   vabs    sum_t |k_t[d]| in key order (attn.v4_sparse's absolute term)
// Device memory: q, the key table, and per chunk the ids, scores and outputs. DSA_CUDA_STATS=1 times the phases.
#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/chain_tile.cuh"
#include "backend/cuda.hpp"
#include "backend/cuda_stats.hpp"
#include "numerics/half_core.hpp"
#include "engines/sparse_attn/sparse_attn_cuda.hpp"

namespace dsa::attn {

namespace {

using i64 = std::int64_t;

__device__ inline double bf16d(std::uint16_t b) { return halfcore::bf16_to_f64(b); }

template <bool F32>
__device__ inline double key_at(const void* keys, i64 id, i64 D, i64 d) {
  if (F32) return static_cast<double>(static_cast<const float*>(keys)[id * D + d]);
  return bf16d(static_cast<const std::uint16_t*>(keys)[id * D + d]);
}

struct Chunk {
  i64 rows = 0, H = 0, D = 0, dv = 0;
  const std::uint16_t* q = nullptr;  // rows of this chunk: [rows, H, D]
  const void* keys = nullptr;
  const i64* ptr = nullptr;  // [rows + 1], from 0
  const i64* ids = nullptr;
  double* S = nullptr;       // per row: H x n at H * ptr[r]
  double* kss = nullptr;     // per key entry
  double* O = nullptr;       // [rows, H, dv]
  double* M = nullptr;
  double* vabs = nullptr;    // [rows, D] or null
  HeadResult* heads = nullptr;  // [rows, H]
};

template <bool F32>
__global__ void kss_kernel(Chunk c) {
  const i64 e = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= c.ptr[c.rows]) return;
  const i64 id = c.ids[e];
  double s2 = 0;
  for (i64 d = 0; d < c.D; ++d) {
    const double k = key_at<F32>(c.keys, id, c.D, d);
    s2 += k * k;
  }
  c.kss[e] = s2;
}

template <bool F32>
__global__ void __launch_bounds__(cuda::kChainThreads) qk_kernel(Chunk c) {
  const i64 r = blockIdx.z, e0 = c.ptr[r], n = c.ptr[r + 1] - e0;
  const i64 t0 = static_cast<i64>(blockIdx.x) * cuda::kChainTJ, h0 = static_cast<i64>(blockIdx.y) * cuda::kChainTI;
  if (t0 >= n || h0 >= c.H) return;  // uniform per block
  const std::uint16_t* qr = c.q + (r * c.H + h0) * c.D;
  const i64* ids = c.ids + e0 + t0;
  double acc[4][4];
  cuda::chain_tile(
      c.H - h0, n - t0, c.D, [&](int i, i64 d) { return bf16d(qr[i * c.D + d]); },
      [&](int j, i64 d) { return key_at<F32>(c.keys, ids[j], c.D, d); }, acc);
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  double* S = c.S + c.H * e0;
  for (int i = 0; i < 4; ++i) {
    const i64 h = h0 + ty + 8 * i;
    for (int j = 0; j < 4; ++j) {
      const i64 t = t0 + tx + 16 * j;
      if (h < c.H && t < n) S[h * n + t] = acc[i][j];
    }
  }
}

__global__ void softmax_kernel(Chunk c, double sm, double gD) {
  const i64 w = (static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= c.rows * c.H) return;  // uniform per warp
  const i64 r = w / c.H, h = w % c.H, e0 = c.ptr[r], n = c.ptr[r + 1] - e0;
  HeadResult res;
  if (n == 0) {  // RowEngine::run without keys
    const double inf = num::detail::inf64();
    res.m = -inf, res.lse = -inf, res.lonely = true;
    if (lane == 0) c.heads[w] = res;
    return;
  }
  double* s = c.S + c.H * e0 + h * n;
  const double inf = num::detail::inf64();
  double m = -inf, zmax = 0.0, km = 0.0;
  i64 tm = n;
  bool nan = false, knan = false;
  for (i64 t = lane; t < n; t += 32) {
    const double z = sm * s[t];
    s[t] = z;
    nan |= z != z;
    if (z > m) m = z, tm = t;
    const double az = fabs(z);
    zmax = zmax < az ? az : zmax;
    const double k2 = c.kss[e0 + t];
    knan |= k2 != k2;
    km = k2 > km ? k2 : km;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const double om = __shfl_xor_sync(0xFFFFFFFFu, m, o);
    const i64 otm = __shfl_xor_sync(0xFFFFFFFFu, tm, o);
    if (om > m || (om == m && otm < tm)) m = om, tm = otm;
    const double oz = __shfl_xor_sync(0xFFFFFFFFu, zmax, o);
    zmax = zmax < oz ? oz : zmax;
    const double ok = __shfl_xor_sync(0xFFFFFFFFu, km, o);
    km = ok > km ? ok : km;
    nan |= __shfl_xor_sync(0xFFFFFFFFu, nan ? 1 : 0, o) != 0;
    knan |= __shfl_xor_sync(0xFFFFFFFFu, knan ? 1 : 0, o) != 0;
  }
  int go = 0;
  if (lane == 0) {
    double q2 = 0;
    const std::uint16_t* qh = c.q + (r * c.H + h) * c.D;
    for (i64 d = 0; d < c.D; ++d) {
      const double x = bf16d(qh[d]);
      q2 += x * x;
    }
    head_bounds(sm, gD, q2, knan ? num::detail::nan64() : km, zmax, m, res);
    go = head_classify(nan, m, res) ? 1 : 0;
  }
  go = __shfl_sync(0xFFFFFFFFu, go, 0);
  for (i64 t = lane; t < n; t += 32) s[t] = go ? num::det_exp(s[t] - m) : 0.0;
  __syncwarp();
  if (lane == 0) {
    if (go) {
      double L = 0;
      for (i64 t = 0; t < n; ++t) L += s[t];
      head_lse(L, res);
    }
    c.heads[w] = res;
  }
}

// O (Abs false) or M (Abs true) of a 32-head x 64-column tile: chains over the row's keys in order.
template <bool F32, bool Abs>
__global__ void __launch_bounds__(cuda::kChainThreads) pv_kernel(Chunk c) {
  const i64 r = blockIdx.z, e0 = c.ptr[r], n = c.ptr[r + 1] - e0;
  const i64 c0 = static_cast<i64>(blockIdx.x) * cuda::kChainTJ, h0 = static_cast<i64>(blockIdx.y) * cuda::kChainTI;
  if (c0 >= c.dv || h0 >= c.H) return;
  const double* P = c.S + c.H * e0 + h0 * n;
  const i64* ids = c.ids + e0;
  double acc[4][4];
  cuda::chain_tile(
      c.H - h0, c.dv - c0, n, [&](int i, i64 t) { return P[i * n + t]; },
      [&](int j, i64 t) {
        const double v = key_at<F32>(c.keys, ids[t], c.D, c0 + j);
        return Abs ? fabs(v) : v;
      },
      acc);
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  double* out = Abs ? c.M : c.O;
  for (int i = 0; i < 4; ++i) {
    const i64 h = h0 + ty + 8 * i;
    for (int j = 0; j < 4; ++j) {
      const i64 col = c0 + tx + 16 * j;
      if (h < c.H && col < c.dv) out[(r * c.H + h) * c.dv + col] = acc[i][j];
    }
  }
}

// head_finish_one of every (row, head, column) on the device (IEEE division, as the host's).
__global__ void finish_kernel(Chunk c) {
  const i64 x = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= c.rows * c.H * c.dv) return;
  head_finish_one(c.heads[x / c.dv], c.O[x], c.M[x]);
}

template <bool F32>
__global__ void vabs_kernel(Chunk c) {
  const i64 x = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= c.rows * c.D) return;
  const i64 r = x / c.D, d = x % c.D, e0 = c.ptr[r], e1 = c.ptr[r + 1];
  double a = 0;
  for (i64 e = e0; e < e1; ++e) a += fabs(key_at<F32>(c.keys, c.ids[e], c.D, d));
  c.vabs[x] = a;
}

unsigned blocks_for(i64 threads, int per) { return static_cast<unsigned>((threads + per - 1) / per); }

}  // namespace

void run_rows_cuda(const DeviceRows& in, const std::function<void(std::int64_t, std::int64_t, const std::vector<RowView>&)>& fn) {
  const i64 R = in.R, H = in.H, D = in.D, dv = in.dv;
  if (R <= 0) return;
  cuda::PhaseClock clk("sparse attention");
  auto sync = [&](const char* phase) {
    if (cuda::stats_on()) cudaDeviceSynchronize();
    clk.mark(phase);
  };
  if (cuda::stats_on()) {
    cudaFree(nullptr);  // the context (the first CUDA call of the process pays for it)
    clk.mark("context");
  }
  cuda::Buffer dq(static_cast<std::size_t>(R * H * D) * 2), dk(static_cast<std::size_t>(in.nkeys * D) * (in.keys_f32 ? 4 : 2));
  dq.upload(in.q, static_cast<std::size_t>(R * H * D) * 2);
  dk.upload(in.keys, static_cast<std::size_t>(in.nkeys * D) * (in.keys_f32 ? 4 : 2));
  sync("upload q + keys");
  const double gD = gamma_n(static_cast<double>(D));
  // Chunks: at most 65535 rows (grid z) and about 2^27 doubles of scores + outputs (1 GiB); a row alone may exceed it.
  const i64 budget = i64{1} << 27;
  std::vector<HeadResult> heads;
  std::vector<double> vabs;
  // O and M come back into a host buffer that is reused over the chunks. A fresh buffer's page faults were the
  // largest phase, and page-locking it (cudaMallocHost) cost more still (measured on an H200 host: 13 ms for 33.5 MB,
  // 47-66 ms for 134 MB): it is an anonymous mapping advised as huge pages whose pages a few host threads touch while
  // the chunk's kernels run; cudaMemcpy then fills it.
  struct HostOut {
    double* p = nullptr;
    std::size_t n = 0, bytes = 0;
    std::vector<double> fallback;
    double* get(std::size_t want) {
      if (want <= n) return p;
      release();
      const std::size_t huge = std::size_t{2} << 20;
      bytes = (want * 8 + huge - 1) / huge * huge;
      void* m = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) {
        bytes = 0;
        fallback.resize(want);
        return fallback.data();
      }
#ifdef MADV_HUGEPAGE
      ::madvise(m, bytes, MADV_HUGEPAGE);
#endif
      p = static_cast<double*>(m), n = want;
      return p;
    }
    // Touches every 4 KiB page of the first `want` doubles on up to 8 threads (the copy overwrites them).
    void touch(std::size_t want) const {
      if (!p || want == 0) return;
      const std::size_t len = want * 8;
      const unsigned nt = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
      std::vector<std::thread> ts;
      for (unsigned i = 0; i < nt; ++i)
        ts.emplace_back([this, len, i, nt] {
          volatile unsigned char* b = reinterpret_cast<unsigned char*>(p);
          for (std::size_t o = (len * i / nt) & ~std::size_t{4095}; o < len * (i + 1) / nt; o += 4096) b[o] = 0;
        });
      for (auto& t : ts) t.join();
    }
    void release() {
      if (p) ::munmap(p, bytes);
      p = nullptr, n = 0, bytes = 0;
    }
    ~HostOut() { release(); }
  } host;
  double *O = nullptr, *M = nullptr;
  std::vector<RowView> views;
  std::vector<i64> ptr;
  for (i64 r0 = 0; r0 < R;) {
    i64 r1 = r0, cost = 0;
    while (r1 < R && r1 - r0 < 65535) {
      const i64 add = H * (in.row_ptr[r1 + 1] - in.row_ptr[r1]) + 2 * H * dv + (in.vabs ? D : 0);
      if (r1 > r0 && cost + add > budget) break;
      cost += add, ++r1;
    }
    const i64 rows = r1 - r0, e0 = in.row_ptr[r0], entries = in.row_ptr[r1] - e0;
    ptr.resize(static_cast<std::size_t>(rows + 1));
    i64 nmax = 0;
    for (i64 r = 0; r <= rows; ++r) ptr[static_cast<std::size_t>(r)] = in.row_ptr[r0 + r] - e0;
    for (i64 r = 0; r < rows; ++r) nmax = std::max(nmax, ptr[static_cast<std::size_t>(r + 1)] - ptr[static_cast<std::size_t>(r)]);
    cuda::Buffer dptr(static_cast<std::size_t>(rows + 1) * 8), dids(static_cast<std::size_t>(entries) * 8),
        dS(static_cast<std::size_t>(H * entries) * 8), dkss(static_cast<std::size_t>(entries) * 8),
        dO(static_cast<std::size_t>(rows * H * dv) * 8), dM(static_cast<std::size_t>(rows * H * dv) * 8),
        dV(in.vabs ? static_cast<std::size_t>(rows * D) * 8 : 0), dH(static_cast<std::size_t>(rows * H) * sizeof(HeadResult));
    dptr.upload(ptr.data(), ptr.size() * 8);
    dids.upload(in.ids + e0, static_cast<std::size_t>(entries) * 8);
    sync("upload ids");
    Chunk c;
    c.rows = rows, c.H = H, c.D = D, c.dv = dv;
    c.q = static_cast<const std::uint16_t*>(dq.get()) + r0 * H * D;
    c.keys = dk.get();
    c.ptr = static_cast<const i64*>(dptr.get());
    c.ids = static_cast<const i64*>(dids.get());
    c.S = static_cast<double*>(dS.get());
    c.kss = static_cast<double*>(dkss.get());
    c.O = static_cast<double*>(dO.get());
    c.M = static_cast<double*>(dM.get());
    c.vabs = in.vabs ? static_cast<double*>(dV.get()) : nullptr;
    c.heads = static_cast<HeadResult*>(dH.get());
    const dim3 gqk(blocks_for(std::max<i64>(nmax, 1), cuda::kChainTJ), blocks_for(H, cuda::kChainTI), static_cast<unsigned>(rows));
    const dim3 gpv(blocks_for(dv, cuda::kChainTJ), blocks_for(H, cuda::kChainTI), static_cast<unsigned>(rows));
    if (entries > 0) {
      if (in.keys_f32) kss_kernel<true><<<blocks_for(entries, 128), 128>>>(c);
      else kss_kernel<false><<<blocks_for(entries, 128), 128>>>(c);
      cuda::check_last("sparse attention: key norms");
      sync("kernel key norms");
      if (in.keys_f32) qk_kernel<true><<<gqk, cuda::kChainThreads>>>(c);
      else qk_kernel<false><<<gqk, cuda::kChainThreads>>>(c);
      cuda::check_last("sparse attention: scores");
      sync("kernel qk");
    }
    softmax_kernel<<<blocks_for(rows * H * 32, 128), 128>>>(c, in.sm, gD);
    cuda::check_last("sparse attention: softmax");
    sync("kernel softmax");
    if (in.keys_f32) pv_kernel<true, false><<<gpv, cuda::kChainThreads>>>(c), pv_kernel<true, true><<<gpv, cuda::kChainThreads>>>(c);
    else pv_kernel<false, false><<<gpv, cuda::kChainThreads>>>(c), pv_kernel<false, true><<<gpv, cuda::kChainThreads>>>(c);
    cuda::check_last("sparse attention: P.V");
    finish_kernel<<<blocks_for(rows * H * dv, 256), 256>>>(c);
    cuda::check_last("sparse attention: head finish");
    sync("kernel pv + finish");
    if (in.vabs) {
      if (in.keys_f32) vabs_kernel<true><<<blocks_for(rows * D, 128), 128>>>(c);
      else vabs_kernel<false><<<blocks_for(rows * D, 128), 128>>>(c);
      cuda::check_last("sparse attention: sum |v|");
    }
    heads.resize(static_cast<std::size_t>(rows * H));
    const std::size_t nout = static_cast<std::size_t>(rows * H * dv);
    O = host.get(2 * nout);
    M = O + nout;
    host.touch(2 * nout);  // while the kernels run
    sync("host buffer");
    dH.download(heads.data(), heads.size() * sizeof(HeadResult));
    dO.download(O, nout * 8);
    dM.download(M, nout * 8);
    if (in.vabs) {
      vabs.resize(static_cast<std::size_t>(rows * D));
      dV.download(vabs.data(), vabs.size() * 8);
    }
    sync("download");
    views.resize(static_cast<std::size_t>(rows));
    for (i64 r = 0; r < rows; ++r) {
      views[static_cast<std::size_t>(r)] =
          RowView{H, dv, ptr[static_cast<std::size_t>(r + 1)] - ptr[static_cast<std::size_t>(r)], heads.data() + r * H,
                  O + r * H * dv, M + r * H * dv, in.vabs ? vabs.data() + r * D : nullptr};
    }
    fn(r0, r1, views);
    clk.mark("write rows (host)");
    r0 = r1;
  }
  clk.print(std::to_string(R) + " rows, H " + std::to_string(H) + ", D " + std::to_string(D) + ", dv " + std::to_string(dv) +
            ", " + std::to_string(in.row_ptr[R]) + " key entries, " + std::to_string(in.nkeys) + " table keys");
}

}  // namespace dsa::attn
