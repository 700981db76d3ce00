// The CUDA engine of the exact indexer logits (see logits_cuda.hpp for the method and the contract).
//
// Blocks of 256 threads (8 warps) own a row group (up to 64 / H query rows of one batch, or one row when H > 64)
// and a chunk of up to kTiles * 64 keys. Per 64-key tile and 64-row subtile of the group's (row, head) rows:
//   1. the digit planes of the 64 keys (and once per group the 64 (row, head) rows) go to shared memory;
//   2. each warp computes a 32 x 16 block of s_h * 2^18 with mma.sync m16n8k32 s8 (five int32 accumulators, one per
//      shift group, folded in fp64: exact), NaN where a code is NaN (the fp64 sum of the CPU is NaN exactly then);
//   3. two threads reduce one logit's heads (logits_core.hpp: lanes h mod 8 in increasing h, lanes 0-3 and 4-7 on
//      the two), scale, certify and store value, M and defined. With H > 64 one thread per logit keeps its lanes
//      across the subtiles, which come in increasing h: the same operations in the same order as the CPU.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "numerics/exact_digits.hpp"
#include "engines/logits/logits_core.hpp"
#include "engines/logits/logits_cuda.hpp"
#include "engines/logits/logits_wgmma.hpp"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the exact logits engine needs sm_80 or newer (int8 mma.sync m16n8k32): set CMAKE_CUDA_ARCHITECTURES >= 80"
#endif

namespace dsa::engines::logits {

namespace {

using i64 = std::int64_t;
constexpr int kBM = 64;     // (row, head) rows per subtile
constexpr int kBN = 64;     // keys per tile
constexpr int kTiles = 8;   // key tiles per block
constexpr int kThreads = 256;  // 8 warps: 2 x 4 warp tiles of 32 (row, head) rows x 16 keys
constexpr int kPad = 16;    // bytes of padding per shared-memory row (conflict-free fragment loads)
constexpr int kSld = kBN + 1;  // doubles per row of the score tile

struct Dev {
  int H, D, RB, nsub;
  const std::int8_t* qd;     // digit planes [3][rows*H][D]
  const std::uint8_t* qnan;  // [rows*H]
  const float* w;            // [rows*H]
  i64 planeQ;
  const std::int8_t* kd;     // digit planes [3][P][D]
  const std::uint8_t* knan;  // [P]
  const float* ksc;          // [P]
  i64 planeK, P;
  const std::int32_t* bt;    // null: key j is physical key j
  i64 tw, ps, num_pages;
  const i64 *lo, *hi, *col0, *batch;
  const i64* grow0;
  const int* gnrows;
  const i64 *gklo, *gkhi, *gprefix;
  i64 ngroups, cols;
  bool bf16;
  void* value;
  double* M;
  std::uint8_t* def;
};

__device__ __forceinline__ void mma_s8(int* c, const std::uint32_t* a, const std::uint32_t* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Stores the logit (row r, key j) from its pre-scale head sums.
__device__ void store_logit(const Dev& d, i64 r, i64 j, double acc, double mag, float sc) {
  std::uint32_t bits;
  double M;
  const bool ok = core::certify(acc, mag, sc, d.H, d.bf16, bits, M);
  const i64 o = r * d.cols + (j - d.col0[r]);
  if (d.bf16)
    static_cast<std::uint16_t*>(d.value)[o] = static_cast<std::uint16_t>(bits);
  else
    static_cast<std::uint32_t*>(d.value)[o] = bits;
  d.M[o] = M;
  d.def[o] = ok ? 1 : 2;
}

__global__ void __launch_bounds__(kThreads, 2) logits_kernel(Dev d) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int D = d.D, LD = D + kPad, H = d.H;
  std::int8_t* As = reinterpret_cast<std::int8_t*>(smem);  // [3][64][LD]
  std::int8_t* Bs = As + 3 * kBM * LD;                        // [3][64][LD]
  double* Ss = reinterpret_cast<double*>(Bs + 3 * kBN * LD);  // [64][kSld]
  double* wsd = Ss + kBM * kSld;                              // [64]
  double* lanes = wsd + kBM;                                  // [64][16]: H > 64, lanes of a logit across subtiles
  float* ksc = reinterpret_cast<float*>(lanes + kBN * 16);    // [64]
  i64* kph = reinterpret_cast<i64*>(ksc + kBN);               // [64]
  std::uint8_t* rnan = reinterpret_cast<std::uint8_t*>(kph + kBN);  // [64]
  std::uint8_t* cnan = rnan + kBM;                                   // [64]

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, gid = lane >> 2, tig = lane & 3;
  const int wm = (warp >> 2) * 32, wn = (warp & 3) * 16;

  // The block's group and chunk: gprefix[g] <= blockIdx.x < gprefix[g + 1].
  const i64 bid = blockIdx.x;
  i64 lo = 0, hi = d.ngroups;
  while (hi - lo > 1) {
    const i64 mid = (lo + hi) / 2;
    if (d.gprefix[mid] <= bid) lo = mid; else hi = mid;
  }
  const i64 g = lo;
  const i64 r0 = d.grow0[g];
  const int nr = d.gnrows[g];
  const i64 jb = d.gklo[g] + (bid - d.gprefix[g]) * kBN * kTiles;
  const i64 je = jb + kBN * kTiles < d.gkhi[g] ? jb + kBN * kTiles : d.gkhi[g];
  const i64 b = d.batch[r0];
  const int MH = nr * H;  // (row, head) rows of the group
  const int vec = D / 16, lv = D == 128 ? 3 : D == 64 ? 2 : 1;  // 16-byte vectors per row, log2

  for (i64 jt = jb; jt < je; jt += kBN) {
    const int nk = static_cast<int>(je - jt < kBN ? je - jt : kBN);
    __syncthreads();
    if (tid < kBN) {
      i64 p = -1;
      if (tid < nk) {
        const i64 j = jt + tid;
        if (d.bt) {
          const i64 page = d.bt[b * d.tw + j / d.ps];
          p = page >= 0 && page < d.num_pages ? page * d.ps + j % d.ps : -1;
        } else {
          p = j;
        }
      }
      kph[tid] = p;
      ksc[tid] = p >= 0 ? d.ksc[p] : 0.0f;
      cnan[tid] = p >= 0 ? d.knan[p] : 0;
    }
    __syncthreads();
    for (int e = tid; e < 3 * kBN * vec; e += kThreads) {
      const int v = e & (vec - 1), n = (e >> lv) & (kBN - 1), pl = e >> (lv + 6);
      uint4 x = make_uint4(0, 0, 0, 0);
      if (kph[n] >= 0) x = reinterpret_cast<const uint4*>(d.kd + pl * d.planeK + kph[n] * D)[v];
      *reinterpret_cast<uint4*>(Bs + (pl * kBN + n) * LD + v * 16) = x;
    }
    for (int sub = 0; sub < d.nsub; ++sub) {
      if (d.nsub > 1 || jt == jb) {
        const i64 m0 = r0 * H + sub * kBM;
        const int mvalid = MH - sub * kBM;
        for (int e = tid; e < 3 * kBM * vec; e += kThreads) {
          const int v = e & (vec - 1), x = (e >> lv) & (kBM - 1), pl = e >> (lv + 6);
          uint4 y = make_uint4(0, 0, 0, 0);
          if (x < mvalid) y = reinterpret_cast<const uint4*>(d.qd + pl * d.planeQ + (m0 + x) * D)[v];
          *reinterpret_cast<uint4*>(As + (pl * kBM + x) * LD + v * 16) = y;
        }
        if (tid < kBM) {
          rnan[tid] = tid < mvalid ? d.qnan[m0 + tid] : 0;
          wsd[tid] = tid < mvalid ? static_cast<double>(d.w[m0 + tid]) : 0.0;
        }
      }
      __syncthreads();
      // 2. s * 2^18 for the warp's 32 x 32 block: per 32-wide k step the three B digit planes stay in registers
      //    and each A plane meets all three (9 mma per (mt, nt)) into the accumulator of its shift group p + q.
      int acc[5][2][2][4];
#pragma unroll
      for (int sg = 0; sg < 5; ++sg)
#pragma unroll
        for (int mt = 0; mt < 2; ++mt)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[sg][mt][nt][c] = 0;
#pragma unroll 1
      for (int kk = 0; kk < D; kk += 32) {
        std::uint32_t bf[3][2][2];
#pragma unroll
        for (int qb = 0; qb < 3; ++qb)
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) {
            const std::int8_t* r = Bs + (qb * kBN + wn + nt * 8 + gid) * LD + kk + tig * 4;
            bf[qb][nt][0] = *reinterpret_cast<const std::uint32_t*>(r);
            bf[qb][nt][1] = *reinterpret_cast<const std::uint32_t*>(r + 16);
          }
#pragma unroll
        for (int pa = 0; pa < 3; ++pa) {
          std::uint32_t af[2][4];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
            const std::int8_t* r = As + (pa * kBM + wm + mt * 16 + gid) * LD + kk + tig * 4;
            af[mt][0] = *reinterpret_cast<const std::uint32_t*>(r);
            af[mt][1] = *reinterpret_cast<const std::uint32_t*>(r + 8 * LD);
            af[mt][2] = *reinterpret_cast<const std::uint32_t*>(r + 16);
            af[mt][3] = *reinterpret_cast<const std::uint32_t*>(r + 8 * LD + 16);
          }
#pragma unroll
          for (int qb = 0; qb < 3; ++qb)
#pragma unroll
            for (int mt = 0; mt < 2; ++mt)
#pragma unroll
              for (int nt = 0; nt < 2; ++nt) mma_s8(acc[pa + qb][mt][nt], af[mt], bf[qb][nt]);
        }
      }
      // s * 2^18 = sum_g 2^(6g) acc_g by Horner in fp64: every intermediate is an integer below 2^53 (exact).
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
#pragma unroll
        for (int nt = 0; nt < 2; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int row = wm + mt * 16 + gid + (c >= 2 ? 8 : 0), col = wn + nt * 8 + tig * 2 + (c & 1);
            double v = static_cast<double>(acc[4][mt][nt][c]);
#pragma unroll
            for (int sg = 3; sg >= 0; --sg) v = v * 64.0 + static_cast<double>(acc[sg][mt][nt][c]);
            double s = v * 0x1p-18;
            if (rnan[row] | cnan[col]) s = __longlong_as_double(0x7FF8000000000000ll);
            Ss[row * kSld + col] = s;
          }
      __syncthreads();
      // 3. Head reduction, certificate, store.
      if (d.nsub == 1) {
        // Two threads per logit (lanes 0-3 and 4-7, tree8 = tree4 + tree4): pairs are adjacent lanes with equal
        // trip counts (RB * 128 is a multiple of the block), so the shuffle sees both.
        for (int L2 = tid; L2 < d.RB * kBN * 2; L2 += kThreads) {
          const int L = L2 >> 1, half = L2 & 1, rl = L / kBN, n = L % kBN;
          const i64 r = r0 + rl, j = jt + n;
          const bool valid = rl < nr && n < nk && j >= d.lo[r] && j < d.hi[r];
          double a[4] = {0, 0, 0, 0}, m[4] = {0, 0, 0, 0};
          const double* s = Ss + rl * H * kSld + n;
          const double* wv = wsd + rl * H;
          core::head_lanes_half([s](int h) { return s[h * kSld]; }, [wv](int h) { return wv[h]; },
                                [wv](int h) { return hd::abs(wv[h]); }, 0, H, half, a, m);
          const double ta = core::tree4(a), tm = core::tree4(m);
          const double oa = __shfl_xor_sync(0xFFFFFFFFu, ta, 1), om = __shfl_xor_sync(0xFFFFFFFFu, tm, 1);
          if (valid && half == 0) store_logit(d, r, j, ta + oa, tm + om, ksc[n]);
        }
      } else if (tid < kBN) {
        const int n = tid;
        double* la = lanes + n * 16;
        double* lm = la + 8;
        if (sub == 0)
          for (int l = 0; l < 8; ++l) la[l] = lm[l] = 0.0;
        const int h0 = sub * kBM, h1 = H < h0 + kBM ? H : h0 + kBM;
        const double* s = Ss + n - h0 * kSld;
        const double* wv = wsd - h0;
        core::head_lanes([s](int h) { return s[h * kSld]; }, [wv](int h) { return wv[h]; },
                         [wv](int h) { return hd::abs(wv[h]); }, h0, h1, la, lm);
        const i64 j = jt + n;
        if (sub == d.nsub - 1 && n < nk && j >= d.lo[r0] && j < d.hi[r0]) store_logit(d, r0, j, core::tree8(la), core::tree8(lm), ksc[n]);
      }
      __syncthreads();
    }
  }
}

// Digit planes of n rows of D codes: row t's codes at src + off(t) (ragged / q: t * D; paged: the planar page
// layout), NaN flag per row; paged caches also give the row's fp32 scale.
__global__ void digits_kernel(const std::uint8_t* src, i64 n, int D, i64 ps, i64 page_bytes, bool paged, std::int8_t* planes,
                              i64 plane, std::uint8_t* nanflag, float* scale) {
  for (i64 e = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; e < n * D; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 t = e / D, dd = e % D;
    const i64 base = paged ? (t / ps) * page_bytes + (t % ps) * D : t * D;
    const std::uint8_t c = src[base + dd];
    const exactdot::Digits g = exactdot::digits(exactdot::scaled_int(c));
    planes[e] = g.d[0];
    planes[plane + e] = g.d[1];
    planes[2 * plane + e] = g.d[2];
    if (exactdot::is_nan_code(c)) nanflag[t] = 1;
    if (paged && dd == 0) memcpy(scale + t, src + (t / ps) * page_bytes + ps * D + 4 * (t % ps), 4);
  }
}

__global__ void fill_kernel(i64 n, bool bf16, bool all_defined, void* value, double* M, std::uint8_t* def) {
  for (i64 e = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; e < n; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    if (bf16)
      static_cast<std::uint16_t*>(value)[e] = 0xFF80u;
    else
      static_cast<std::uint32_t*>(value)[e] = 0xFF800000u;
    M[e] = 0.0;
    def[e] = all_defined ? 1 : 0;
  }
}

unsigned grid_for(i64 n) { return static_cast<unsigned>(std::min<i64>((n + 255) / 256, 65536)); }

}  // namespace

namespace {

struct Groups {
  std::vector<i64> grow0, gklo, gkhi, gprefix{0};
  std::vector<int> gnrows;
};

// Row groups: up to RB consecutive rows of one batch with their key range, cut into chunks of `chunk` keys
// (gprefix: the first chunk of each group).
Groups make_groups(const GpuLogitsJob& job, int RB, i64 chunk, i64 align = 1) {
  Groups g;
  const i64 R = job.rows;
  for (i64 r = 0; r < R;) {
    i64 e = r + 1;
    while (e < R && e - r < RB && job.batch[e] == job.batch[r]) ++e;
    i64 klo = INT64_MAX, khi = 0;
    for (i64 x = r; x < e; ++x)
      if (job.hi[x] > job.lo[x]) klo = std::min(klo, job.lo[x]), khi = std::max(khi, job.hi[x]);
    if (khi > klo) {
      g.grow0.push_back(r);
      g.gnrows.push_back(static_cast<int>(e - r));
      g.gklo.push_back(klo);
      g.gkhi.push_back(khi);
      g.gprefix.push_back(g.gprefix.back() + (khi - (klo - klo % align) + chunk - 1) / chunk);
    }
    r = e;
  }
  return g;
}

// The engine: DSA_CUDA_LOGITS_ENGINE = mma | wgmma forces one (wgmma where it cannot run: an error); by default the
// sm_90a engine where it runs and supports the shape, else mma.sync. N: 128 columns (128 / H rows per group) unless
// that leaves most groups half empty (one row per batch, H <= 64: N = 64).
int choose_wgmma_columns(const GpuLogitsJob& job) {
  const char* env = std::getenv("DSA_CUDA_LOGITS_ENGINE");
  const std::string force = env ? env : "";
  if (!force.empty() && force != "mma" && force != "wgmma")
    throw std::runtime_error("DSA_CUDA_LOGITS_ENGINE='" + force + "': expected mma or wgmma");
  if (force == "mma") return 0;
  int nt = 0;
  if (wgmma_engine_available() && wgmma_engine_supports(job.H, job.D, 128)) {
    nt = 128;
    if (job.H <= 64 && wgmma_engine_supports(job.H, job.D, 64)) {
      const Groups g = make_groups(job, 128 / job.H, INT64_MAX / 2);
      i64 rows = 0;
      for (int n : g.gnrows) rows += n;
      if (!g.gnrows.empty() && 2 * rows <= static_cast<i64>(g.gnrows.size()) * (128 / job.H)) nt = 64;
    }
  }
  if (force == "wgmma" && nt == 0)
    throw std::runtime_error("DSA_CUDA_LOGITS_ENGINE=wgmma: the sm_90a engine cannot run this job here (it needs a compute "
                             "capability 9.0 device, a build with sm_90a code, D = 128 and H in 16, 32, 64, 128)");
  return nt;
}

// DSA_WGMMA_WARPGROUPS: the wgmma engine's warpgroups for N 128 with H <= 64, 4 (default) or 2; any other value is
// an error (checked on every call, whichever engine runs).
int wgmma_warpgroups() {
  const char* env = std::getenv("DSA_WGMMA_WARPGROUPS");
  if (!env) return 4;
  const std::string v = env;
  if (v != "2" && v != "4") throw std::runtime_error("DSA_WGMMA_WARPGROUPS='" + v + "': expected 2 or 4");
  return v == "2" ? 2 : 4;
}

// The four timing events of one call (whole call, kernel), created checked and destroyed on every path.
struct TimingEvents {
  cudaEvent_t e[4] = {};
  TimingEvents() {
    for (int i = 0; i < 4; ++i)
      if (cudaEventCreate(&e[i]) != cudaSuccess) {
        for (int j = 0; j < i; ++j) cudaEventDestroy(e[j]);
        cuda::check_last("cudaEventCreate");
      }
  }
  ~TimingEvents() {
    for (cudaEvent_t x : e) cudaEventDestroy(x);
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
};

}  // namespace

void logits_cuda(GpuLogitsJob& job) {
  const int H = job.H, D = job.D;
  const i64 R = job.rows, n_out = R * job.cols;
  const bool paged = job.cache != nullptr;
  if (H <= 0 || H % 8 != 0 || (D != 32 && D != 64 && D != 128)) throw std::runtime_error("logits_cuda: unsupported H/D");
  const int NT = choose_wgmma_columns(job);  // 0: the mma.sync engine
  const int WG = wgmma_warpgroups();
  const int RB = NT ? NT / H : H <= kBM ? kBM / H : 1;
  const int nsub = H <= kBM ? 1 : (H + kBM - 1) / kBM;
  const Groups G = NT ? make_groups(job, RB, kWgmmaItemKeys, 64) : make_groups(job, RB, kBN * kTiles);
  const i64 ngroups = static_cast<i64>(G.grow0.size()), nblocks = G.gprefix.back();
  const i64 P = paged ? job.num_pages * job.page_size : job.nkeys;

  i64 bytes = 0;
  auto buf = [&bytes](i64 n) {
    bytes += std::max<i64>(n, 1);
    return std::make_unique<cuda::Buffer>(static_cast<std::size_t>(n));
  };
  auto up = [&buf](const void* src, i64 n) {
    auto b = buf(n);
    if (n > 0) b->upload(src, static_cast<std::size_t>(n));
    return b;
  };
  const std::size_t vb = job.bf16 ? 2 : 4;
  auto d_value = buf(n_out * static_cast<i64>(vb)), d_M = buf(n_out * 8), d_def = buf(n_out);

  TimingEvents evs;
  cudaEvent_t ev0 = evs.e[0], ev1 = evs.e[1], evk0 = evs.e[2], evk1 = evs.e[3];
  cudaEventRecord(ev0);
  if (n_out > 0) {
    fill_kernel<<<grid_for(n_out), 256>>>(n_out, job.bf16, job.all_defined, d_value->get(), static_cast<double*>(d_M->get()),
                                          static_cast<std::uint8_t*>(d_def->get()));
    cuda::check_last("logits fill kernel");
  }
  if (nblocks > 0) {
    const i64 MHall = R * H;
    // Queries: the wgmma engine converts its row group's codes in shared memory; the mma.sync engine reads three
    // digit planes.
    auto d_q = up(job.q, MHall * D);
    std::unique_ptr<cuda::Buffer> d_qd, d_qnan;
    if (!NT) {
      d_qd = buf(3 * MHall * D);
      d_qnan = buf(MHall);
      d_qnan->fill(0);
      digits_kernel<<<grid_for(MHall * D), 256>>>(static_cast<const std::uint8_t*>(d_q->get()), MHall, D, 1, 0, false,
                                                  static_cast<std::int8_t*>(d_qd->get()), MHall * D,
                                                  static_cast<std::uint8_t*>(d_qnan->get()), nullptr);
      cuda::check_last("logits q digits kernel");
      d_q.reset();
    }
    auto d_w = up(job.w, MHall * 4);
    // Keys: the mma.sync engine reads digit planes x0, x1, x2 [3][P][D], NaN flags and scales; the wgmma engine
    // tile blocks (logits_wgmma.hpp).
    std::unique_ptr<cuda::Buffer> d_kd, d_knan, d_ksc, d_blocks, d_bt;
    const i64 nblk = (P + 63) / 64 + 1;  // wgmma: the key blocks and the zero block
    {
      const i64 page_bytes = job.page_size * (D + 4);
      auto d_src = paged ? up(job.cache, job.num_pages * page_bytes) : up(job.kv, P * D);
      if (!paged) d_ksc = up(job.kv_scale, P * 4);
      if (NT) {
        d_blocks = buf(nblk * kWgmmaBlockBytes);
        d_blocks->fill(0);
        if (const char* e = wgmma_build_blocks(static_cast<const std::uint8_t*>(d_src->get()), paged ? nullptr : static_cast<const float*>(d_ksc->get()),
                                               P, paged ? job.page_size : 1, page_bytes, paged, static_cast<unsigned char*>(d_blocks->get()));
            *e)
          throw std::runtime_error(std::string("CUDA logits key blocks kernel: ") + e);
      } else {
        d_kd = buf(3 * P * D);
        d_knan = buf(P);
        if (paged) d_ksc = buf(P * 4);
        d_knan->fill(0);
        if (P > 0) {
          digits_kernel<<<grid_for(P * D), 256>>>(static_cast<const std::uint8_t*>(d_src->get()), P, D, paged ? job.page_size : 1,
                                                  page_bytes, paged, static_cast<std::int8_t*>(d_kd->get()), P * D,
                                                  static_cast<std::uint8_t*>(d_knan->get()), static_cast<float*>(d_ksc->get()));
          cuda::check_last("logits k digits kernel");
        }
      }
    }
    if (paged) d_bt = up(job.block_table, job.batches * job.table_width * 4);
    auto d_lo = up(job.lo, R * 8), d_hi = up(job.hi, R * 8), d_col0 = up(job.col0, R * 8), d_batch = up(job.batch, R * 8);
    auto d_grow0 = up(G.grow0.data(), ngroups * 8), d_gnrows = up(G.gnrows.data(), ngroups * 4), d_gklo = up(G.gklo.data(), ngroups * 8),
         d_gkhi = up(G.gkhi.data(), ngroups * 8), d_gprefix = up(G.gprefix.data(), (ngroups + 1) * 8);
    if (NT) {
      WgmmaParams w;
      w.warpgroups = WG;
      w.H = H;
      w.D = D;
      w.NT = NT;
      w.q = static_cast<const std::uint8_t*>(d_q->get());
      w.w = static_cast<const float*>(d_w->get());
      w.blocks = static_cast<const unsigned char*>(d_blocks->get());
      w.zero_block = nblk - 1;
      w.P = P;
      w.bulk = !paged || job.page_size % 64 == 0;
      w.bt = paged ? static_cast<const std::int32_t*>(d_bt->get()) : nullptr;
      w.tw = job.table_width;
      w.ps = paged ? job.page_size : 1;
      w.num_pages = job.num_pages;
      w.lo = static_cast<const i64*>(d_lo->get());
      w.hi = static_cast<const i64*>(d_hi->get());
      w.col0 = static_cast<const i64*>(d_col0->get());
      w.batch = static_cast<const i64*>(d_batch->get());
      w.grow0 = static_cast<const i64*>(d_grow0->get());
      w.gnrows = static_cast<const int*>(d_gnrows->get());
      w.gklo = static_cast<const i64*>(d_gklo->get());
      w.gkhi = static_cast<const i64*>(d_gkhi->get());
      w.gprefix = static_cast<const i64*>(d_gprefix->get());
      w.ngroups = ngroups;
      w.nitems = nblocks;
      w.cols = job.cols;
      w.bf16 = job.bf16;
      w.value = d_value->get();
      w.M = static_cast<double*>(d_M->get());
      w.def = static_cast<std::uint8_t*>(d_def->get());
      cudaEventRecord(evk0);
      if (const char* e = wgmma_engine_launch(w); *e) throw std::runtime_error(std::string("CUDA wgmma logits kernel: ") + e);
      cudaEventRecord(evk1);
    } else {
      Dev d{};
      d.H = H;
      d.D = D;
      d.RB = RB;
      d.nsub = nsub;
      d.qd = static_cast<const std::int8_t*>(d_qd->get());
      d.qnan = static_cast<const std::uint8_t*>(d_qnan->get());
      d.w = static_cast<const float*>(d_w->get());
      d.planeQ = MHall * D;
      d.kd = static_cast<const std::int8_t*>(d_kd->get());
      d.knan = static_cast<const std::uint8_t*>(d_knan->get());
      d.ksc = static_cast<const float*>(d_ksc->get());
      d.planeK = P * D;
      d.P = P;
      d.bt = paged ? static_cast<const std::int32_t*>(d_bt->get()) : nullptr;
      d.tw = job.table_width;
      d.ps = paged ? job.page_size : 1;
      d.num_pages = job.num_pages;
      d.lo = static_cast<const i64*>(d_lo->get());
      d.hi = static_cast<const i64*>(d_hi->get());
      d.col0 = static_cast<const i64*>(d_col0->get());
      d.batch = static_cast<const i64*>(d_batch->get());
      d.grow0 = static_cast<const i64*>(d_grow0->get());
      d.gnrows = static_cast<const int*>(d_gnrows->get());
      d.gklo = static_cast<const i64*>(d_gklo->get());
      d.gkhi = static_cast<const i64*>(d_gkhi->get());
      d.gprefix = static_cast<const i64*>(d_gprefix->get());
      d.ngroups = ngroups;
      d.cols = job.cols;
      d.bf16 = job.bf16;
      d.value = d_value->get();
      d.M = static_cast<double*>(d_M->get());
      d.def = static_cast<std::uint8_t*>(d_def->get());
      const int LD = D + kPad;
      const std::size_t smem = static_cast<std::size_t>(6 * 64 * LD) + kBM * kSld * 8 + kBM * 8 + kBN * 16 * 8 + kBN * 4 + kBN * 8 + kBM + kBN;
      if (cudaFuncSetAttribute(logits_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)) != cudaSuccess)
        cuda::check_last("cudaFuncSetAttribute(logits_kernel)");
      if (nblocks > 0x7FFFFFFFll) throw std::runtime_error("logits_cuda: too many blocks");
      cudaEventRecord(evk0);
      logits_kernel<<<static_cast<unsigned>(nblocks), kThreads, smem>>>(d);
      cudaEventRecord(evk1);
    }
    cuda::check_last("logits kernel");
  }
  cudaEventRecord(ev1);
  cudaEventSynchronize(ev1);
  cuda::check_last("logits kernel");
  float ms = 0, kms = 0;
  cudaEventElapsedTime(&ms, ev0, ev1);
  if (nblocks > 0) cudaEventElapsedTime(&kms, evk0, evk1);
  job.device_ms = ms;
  job.kernel_ms = kms;
  job.device_bytes = bytes;
  job.engine = NT ? (NT == 128 ? "wgmma-n128" : "wgmma-n64") : "mma.sync";
  d_value->download(job.value, static_cast<std::size_t>(n_out) * vb);
  d_M->download(job.M, static_cast<std::size_t>(n_out) * 8);
  d_def->download(job.defined, static_cast<std::size_t>(n_out));
}

}  // namespace dsa::engines::logits
