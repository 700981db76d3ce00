// The Hopper (sm_90a) engine of the exact indexer logits: see logits_wgmma.hpp for the method and the contract.
// Built for sm_90a only (CMake: the dsawgmma library); elsewhere the kernels compile to nothing and
// wgmma_engine_available() is false, so logits_cuda.cu runs its mma.sync engine.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "numerics/exact_digits.hpp"
#include "engines/logits/logits_core.hpp"
#include "engines/logits/logits_wgmma.hpp"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DSA_WG_BODY 1
#endif

namespace dsa::engines::logits {

namespace {

using i64 = std::int64_t;
constexpr int kKeys = 64;        // keys per warpgroup tile (wgmma M)
constexpr int kBlocks = 2;       // tile blocks per CTA (two tiles in flight)
constexpr int kPlanes = 5;
constexpr int kD = 128;          // dims (the engine's only D: DeepSeek's indexer head dim)

// Shared memory of one block (offsets in bytes from the dynamic base).
struct Smem {
  int NT;
  __host__ __device__ int b_planes() const { return 0; }                                      // [5][NT][128] core matrices
  __host__ __device__ int a_block(int b) const { return kPlanes * NT * kD + b * static_cast<int>(kWgmmaBlockBytes); }
  __host__ __device__ int wsm() const { return a_block(kBlocks); }                                 // double [NT]: w 2^-19
  __host__ __device__ int wabs() const { return wsm() + NT * 8; }                              // double [NT]: |w| 2^-19
  __host__ __device__ int rows() const { return wabs() + NT * 8; }                             // i64 lo, hi, col0 [3][8]
  __host__ __device__ int qnan() const { return rows() + 3 * 8 * 8; }                          // u8 [NT]
  __host__ __device__ int gnan() const { return qnan() + NT; }                                 // int
  __host__ __device__ int mbar() const { return gnan() + 16; }                                 // u64 [kBlocks]
  __host__ __device__ int bytes() const { return mbar() + 8 * kBlocks; }
};
constexpr int kPlaneBytes = kKeys * kD;                  // one digit plane of a tile block
constexpr int kScaleOff = kPlanes * kPlaneBytes;         // float [64]
constexpr int kNanOff = kScaleOff + 4 * kKeys;           // u8 [64]
static_assert(kNanOff + kKeys == kWgmmaBlockBytes, "tile block layout");

#ifdef DSA_WG_BODY
__device__ __forceinline__ void wgmma_n64(int (&d)[32], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p;\n}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31])
      : "l"(a), "l"(b), "r"(accumulate));
}
__device__ __forceinline__ void wgmma_n128(int (&d)[64], std::uint64_t a, std::uint64_t b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
      : "l"(a), "l"(b), "r"(accumulate));
}

__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
__device__ __forceinline__ void reg_fence(int& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// The warpgroups of one tile block (1 or 2: PAIR x 128 threads) meet at barrier 1 + block.
template <int PAIR>
__device__ __forceinline__ void block_barrier(int blk) { asm volatile("bar.sync %0, %1;\n" ::"r"(blk + 1), "n"(128 * PAIR) : "memory"); }
__device__ __forceinline__ void cp16(void* dst, const void* src, bool valid) {
  const std::uint32_t s = static_cast<std::uint32_t>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ std::uint32_t smem_addr(const void* p) { return static_cast<std::uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbar_init(std::uint64_t* m) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_addr(m)) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// One thread: the tile block (bytes, 16-byte aligned both sides) by the bulk copy engine, completing on m.
__device__ __forceinline__ void bulk_load(void* dst, const void* src, std::uint32_t bytes, std::uint64_t* m) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(m)), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(m))
               : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint64_t* m, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_addr(m)), "r"(parity)
                 : "memory");
  } while (!done);
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Matrix descriptor of a K-major operand without swizzle: 8-row x 16-byte core matrices, LBO between the two core
// matrices of one 32-byte k step, SBO between 8-row groups.
__device__ __forceinline__ std::uint64_t mdesc(const void* smem, std::uint32_t lbo, std::uint32_t sbo) {
  const std::uint32_t a = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  return static_cast<std::uint64_t>((a & 0x3FFFF) >> 4) | static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16 |
         static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32;
}

template <int NT>
__device__ __forceinline__ void wgmma(int (&d)[NT / 2], std::uint64_t a, std::uint64_t b, int acc) {
  if constexpr (NT == 128) wgmma_n128(d, a, b, acc);
  else wgmma_n64(d, a, b, acc);
}

// acc (+)= A[plane pa] . B[plane pb] over all of D: NT columns of B, whose planes lie PS columns apart. ad, bd: the
// descriptors of A's and B's first bytes; a byte offset o is + (o >> 4) in the start-address field (shared-memory
// addresses stay below 2^18, so the 14-bit field never carries), constants here: no address arithmetic per MMA.
template <int NT, int PS>
__device__ __forceinline__ void unit(int (&acc)[NT / 2], std::uint64_t ad, std::uint64_t bd, int pa, int pb, bool accumulate) {
  constexpr int D = kD;
#pragma unroll
  for (int s = 0; s < D / 32; ++s)
    wgmma<NT>(acc, ad + static_cast<std::uint32_t>((pa * kKeys * D + s * 256) >> 4), bd + static_cast<std::uint32_t>((pb * PS * D + s * 256) >> 4),
              accumulate || s > 0 ? 1 : 0);
}

template <int NT>
__device__ __forceinline__ void fence_all(int (&r)[NT / 2]) {
#pragma unroll
  for (int i = 0; i < NT / 2; ++i) reg_fence(r[i]);
}

// Byte offset of (row n, byte k) of an operand with D-byte rows in the core-matrix layout.
__device__ __forceinline__ int cm_off(int n, int k, int D) { return ((n >> 3) * (D >> 4) + (k >> 4)) * 128 + (n & 7) * 16 + (k & 15); }

// The five digit bytes of a code (x0, x1, x2, x(1), x(-1)) as one word + one byte; NaN codes give zeros.
__device__ __forceinline__ void code_digits(std::uint8_t c, std::uint32_t& lo4, std::uint32_t& b4) {
  const exactdot::Digits g = exactdot::digits(exactdot::scaled_int(c));
  lo4 = static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[0])) | static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[1])) << 8 |
        static_cast<std::uint32_t>(static_cast<std::uint8_t>(g.d[2])) << 16 |
        static_cast<std::uint32_t>(static_cast<std::uint8_t>(exactdot::toom_p1(g))) << 24;
  b4 = static_cast<std::uint8_t>(exactdot::toom_m1(g));
}

// What the epilogue of one tile reads: the tile's first key jt, the segment's end kb, the group's rows, the thread's
// keys k0 and k0 + 8 of the tile, its quad index, and the shared arrays.
struct TileCtx {
  const WgmmaParams& p;
  i64 jt, kb, r0;
  int nr, k0, tig;
  bool kn0, kn1;           // the thread's keys' NaN flags
  float sc0, sc1;          // and scales
  const std::uint8_t* qn;  // column NaN flags
  const double *wsm, *wab;
  const i64 *rlo, *rhi, *rc0;
};

// A logit whose certificate waits for the next tile's pass (one row a pass: logits_wgmma.hpp, epilogue).
// Kept on even turns of a segment, stored on odd ones (its key is 128 before the odd tile's).
struct Pending {
  double a = 0, m = 0;
  float sc = 0;
};

// The certificate and the stores of one logit (row rr of the thread's rows, key `key`), when it is the rows' to keep.
template <int H>
__device__ __forceinline__ void store_logit(const TileCtx& x, int rr, i64 key, double sa, double sm, float sc) {
  if (rr < x.nr && key < x.kb && key >= x.rlo[rr] && key < x.rhi[rr]) {
    std::uint32_t bits;
    double M;
    const bool ok = core::certify(sa, sm, sc, H, x.p.bf16, bits, M);
    const i64 o = (x.r0 + rr) * x.p.cols + (key - x.rc0[rr]);
    if (x.p.bf16)
      static_cast<std::uint16_t*>(x.p.value)[o] = static_cast<std::uint16_t>(bits);
    else
      static_cast<std::uint32_t*>(x.p.value)[o] = bits;
    x.p.M[o] = M;
    x.p.def[o] = ok ? 1 : 2;
  }
}

// s 2^18 = 2048 R - 4095 T per score (logits_wgmma.hpp), relu, the lanes of logits_core.hpp head_lanes in increasing h, tree8 (in-thread
// pair, xor 1, xor 2), certificate and store; rows go in passes of up to two, and in a pass the quad's thread tig
// certifies and stores the logit 2 q + kk = tig (row q of the pass, the thread's key kk). With one row a tile the
// pass takes two tiles: lanes tig 0 and 1 keep their logit in `pend` for the next tile's pass, which stores it beside
// that tile's two logits (lanes 2 and 3); the kernel flushes what is pending at the end of a segment.
template <int NT, int H, bool NANS>
__device__ __forceinline__ void epilogue(const TileCtx& x, const int (&R)[NT / 2], const int (&T)[NT / 2], Pending& pend, bool odd) {
  constexpr int RB = NT / H, JPR = H / 8;
  constexpr int GR = RB >= 2 ? 2 : 1;  // rows per store pass: a quad's four lanes store 2 GR logits at once
  const bool kn0 = x.kn0, kn1 = x.kn1;
  const int mk = x.tig & 1, mq = x.tig >> 1;  // the lane's logit of a pass: key k0 + 8 mk, row mq of the pass (GR 2)
#pragma unroll
  for (int g0 = 0; g0 < RB; g0 += GR) {
    double ka[GR], km[GR];  // after xor 1: the lane's key's sums of the quad's lane pair (tig, tig ^ 1), per row
#pragma unroll
    for (int q = 0; q < GR; ++q) {
      const int rr = g0 + q;
      double a[2][2] = {{0.0, 0.0}, {0.0, 0.0}}, m[2][2] = {{0.0, 0.0}, {0.0, 0.0}};
#pragma unroll
      for (int jj = 0; jj < JPR; ++jj) {
        const int j = rr * JPR + jj, c = 8 * j + 2 * x.tig;
        const double2 wv = *reinterpret_cast<const double2*>(x.wsm + c);
        const double2 wa = *reinterpret_cast<const double2*>(x.wab + c);
#pragma unroll
        for (int kk = 0; kk < 2; ++kk)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int i = 4 * j + 2 * kk + e;
            // s 2^18 = 2048 X - 4095 Y by two IMAD.WIDE, one conversion (exact: |s 2^18| < 2^43), and relu as r + |r| =
            // 2 relu(r) (exact; +0 for r <= 0) against weights halved in shared memory, so each fma's product and sum
            // are head_lanes' own: no integer compare or select per score.
            const long long n = exactdot::wg_value(R[i], T[i]);
            double r = static_cast<double>(n);
            r = r + fabs(r);
            if constexpr (NANS)
              if ((kk ? kn1 : kn0) || x.qn[c + e]) r = __longlong_as_double(0x7FF8000000000000ll);
            a[kk][e] = ::fma(r, e ? wv.y : wv.x, a[kk][e]);
            m[kk][e] = ::fma(r, e ? wa.y : wa.x, m[kk][e]);
          }
      }
      // tree8 (the in-thread pair, then xor 1 and xor 2) as a reduce-scatter: at xor 1 a lane sends the pair sums of
      // the key it does not keep and adds its partner's of the key it keeps (own + partner's, as the butterfly does).
      const double a0 = a[0][0] + a[0][1], a1 = a[1][0] + a[1][1], m0 = m[0][0] + m[0][1], m1 = m[1][0] + m[1][1];
      const double ga = mk ? a0 : a1, gm = mk ? m0 : m1;
      ka[q] = (mk ? a1 : a0) + __shfl_xor_sync(0xFFFFFFFFu, ga, 1);
      km[q] = (mk ? m1 : m0) + __shfl_xor_sync(0xFFFFFFFFu, gm, 1);
    }
    // xor 2: lanes tig and tig ^ 2 keep the same key; with two rows a pass the lane keeps row mq and sends the other.
    double sa, sm;
    if constexpr (GR == 1) {
      sa = ka[0] + __shfl_xor_sync(0xFFFFFFFFu, ka[0], 2);
      sm = km[0] + __shfl_xor_sync(0xFFFFFFFFu, km[0], 2);
    } else {
      sa = (mq ? ka[1] : ka[0]) + __shfl_xor_sync(0xFFFFFFFFu, mq ? ka[0] : ka[1], 2);
      sm = (mq ? km[1] : km[0]) + __shfl_xor_sync(0xFFFFFFFFu, mq ? km[0] : km[1], 2);
    }
    const float sc = mk ? x.sc1 : x.sc0;
    if constexpr (RB == 1) {
      if (!odd) {  // warp-uniform: every other tile
        pend.a = sa, pend.m = sm, pend.sc = sc;
        return;
      }
      const bool old = x.tig < 2;  // one call site: one divergent pass
      const i64 key = x.jt - (old ? 2 * kKeys : 0) + x.k0 + 8 * mk;  // this warpgroup's previous tile: 2 tiles back
      store_logit<H>(x, 0, key, old ? pend.a : sa, old ? pend.m : sm, old ? pend.sc : sc);
      return;
    }
    // One certificate pass for the group: lane tig takes logit 2 q + kk = tig (row g0 + mq, key k0 + 8 mk), so the
    // divergent certify runs once per pass, not once per logit.
    if (mq < GR) store_logit<H>(x, g0 + mq, x.jt + x.k0 + 8 * mk, sa, sm, sc);
  }
}

// WG consumer warpgroups: 2 (each tile block is one warpgroup's: all NT columns), or 4 (each tile block is shared by
// a pair, each warpgroup computing NT / 2 columns: half the accumulators, so twice the warps per scheduler).
template <int NT, int H, int WG>
__global__ void __launch_bounds__(128 * WG, 1) wgmma_logits_kernel(const WgmmaParams p) {
  constexpr int RB = NT / H;  // rows per group
  constexpr int D = kD;
  constexpr int kThreads = 128 * WG, PAIR = WG / kBlocks, NW = NT / PAIR, RBW = NW / H;  // NW columns, RBW rows a warpgroup
  extern __shared__ __align__(1024) unsigned char smem[];
  const Smem L{NT};
  std::int8_t* B = reinterpret_cast<std::int8_t*>(smem + L.b_planes());
  double* wsm = reinterpret_cast<double*>(smem + L.wsm());
  double* wab = reinterpret_cast<double*>(smem + L.wabs());
  i64* rlo = reinterpret_cast<i64*>(smem + L.rows());
  i64* rhi = rlo + 8;
  i64* rc0 = rlo + 16;
  std::uint8_t* qn = smem + L.qnan();
  int* gnan = reinterpret_cast<int*>(smem + L.gnan());

  // wg through a shuffle from lane 0: the compiler then knows it is warp-uniform (as CUTLASS's canonical warp group
  // index), so the MMA descriptors below live in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xFFFFFFFFu, tid >> 7, 0), lt = tid & 127, warp = lt >> 5, lane = tid & 31, gid = lane >> 2, tig = lane & 3;
  const int blk = wg / PAIR, part = wg % PAIR;  // the warpgroup's tile block and its columns [part NW, part NW + NW)
  const bool loader = part == 0;                // issues the block's copies
  unsigned char* Ab = smem + L.a_block(blk);    // this warpgroup's tile block
  const std::int8_t* A = reinterpret_cast<const std::int8_t*>(Ab);
  const float* Asc = reinterpret_cast<const float*>(Ab + kScaleOff);
  const std::uint8_t* Akn = Ab + kNanOff;
  std::uint64_t* mbar = reinterpret_cast<std::uint64_t*>(smem + L.mbar()) + blk;
  if (loader && lt == 0) mbar_init(mbar);
  mbar_init_fence();
  __syncthreads();
  std::uint32_t parity = 0;

  // This block's items: [ib, ie) of a persistent grid over equal chunks of keys.
  const i64 G = gridDim.x, bid = blockIdx.x;
  const i64 ib = bid * p.nitems / G, ie = (bid + 1) * p.nitems / G;
  for (i64 it = ib; it < ie;) {
    i64 lo = 0, hi = p.ngroups;  // group of item it: gprefix[g] <= it < gprefix[g + 1]
    while (hi - lo > 1) {
      const i64 mid = (lo + hi) / 2;
      if (p.gprefix[mid] <= it) lo = mid; else hi = mid;
    }
    const i64 g = lo, it_end = ie < p.gprefix[g + 1] ? ie : p.gprefix[g + 1];
    // Items and tiles start at multiples of 64 keys (keys below the rows' ranges are computed and not stored).
    const i64 base = p.gklo[g] & ~static_cast<i64>(kKeys - 1);
    const i64 ka = base + (it - p.gprefix[g]) * kWgmmaItemKeys;
    const i64 kb0 = base + (it_end - p.gprefix[g]) * kWgmmaItemKeys;
    const i64 kb = kb0 < p.gkhi[g] ? kb0 : p.gkhi[g];
    it = it_end;
    const i64 r0 = p.grow0[g];
    const int nr = p.gnrows[g];
    const i64 bb = p.batch[r0];

    // The group's query digit planes, weights (times 2^-18: exact) and rows, once per segment.
    __syncthreads();  // both warpgroups are done with the previous segment's planes
    if (tid == 0) *gnan = 0;
    if (tid < NT) qn[tid] = 0;
    __syncthreads();
    constexpr int words = D / 4;
    for (int e = tid; e < NT * words; e += kThreads) {
      const int c = e / words, k4 = (e % words) * 4;
      std::uint32_t codes = 0;
      if (c < nr * H) codes = *reinterpret_cast<const std::uint32_t*>(p.q + (r0 * H + c) * D + k4);
      std::uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0, w4 = 0;
      bool nan = false;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const std::uint8_t code = static_cast<std::uint8_t>(codes >> (8 * b));
        nan = nan || exactdot::is_nan_code(code);
        std::uint32_t lo4, b4;
        code_digits(code, lo4, b4);
        w0 |= (lo4 & 0xFFu) << (8 * b);
        w1 |= ((lo4 >> 8) & 0xFFu) << (8 * b);
        w2 |= ((lo4 >> 16) & 0xFFu) << (8 * b);
        w3 |= (lo4 >> 24) << (8 * b);
        w4 |= b4 << (8 * b);
      }
      const int off = cm_off(c, k4, D);
      *reinterpret_cast<std::uint32_t*>(B + off) = w0;
      *reinterpret_cast<std::uint32_t*>(B + NT * D + off) = w1;
      *reinterpret_cast<std::uint32_t*>(B + 2 * NT * D + off) = w2;
      *reinterpret_cast<std::uint32_t*>(B + 3 * NT * D + off) = w3;
      *reinterpret_cast<std::uint32_t*>(B + 4 * NT * D + off) = w4;
      if (nan) {
        qn[c] = 1;
        *gnan = 1;
      }
    }
    if (tid < NT) {
      const double wv = tid < nr * H ? static_cast<double>(p.w[r0 * H + tid]) * 0x1p-19 : 0.0;  // w 2^-18 / 2 (relu above)
      wsm[tid] = wv;
      wab[tid] = hd::abs(wv);
    }
    if (tid < RB) {
      const bool ok = tid < nr;
      rlo[tid] = ok ? p.lo[r0 + tid] : 0;
      rhi[tid] = ok ? p.hi[r0 + tid] : 0;
      rc0[tid] = ok ? p.col0[r0 + tid] : 0;
    }
    proxy_fence();
    __syncthreads();
    const bool group_nan = *gnan != 0;

    // Tile t of the segment (keys ka + 64 t ..) into this warpgroup's tile block: one bulk copy of the whole block
    // when its 64 keys are one aligned block of the key array (ragged; paged with page_size % 64 == 0), else a
    // per-key gather (cp.async of each key's 16-byte chunks, scale and NaN flag by plain loads).
    auto issue = [&](i64 t) {  // by the loader warpgroup of the block
      const i64 jt = ka + t * kKeys;
      if (p.bulk) {
        if (lt == 0) {
          i64 blk = p.zero_block;
          if (!p.bt) {
            if (jt < p.P) blk = jt / kKeys;
          } else {
            const i64 page = p.bt[bb * p.tw + jt / p.ps];
            if (page >= 0 && page < p.num_pages) blk = (page * p.ps + jt % p.ps) / kKeys;
          }
          bulk_load(Ab, p.blocks + blk * kWgmmaBlockBytes, static_cast<std::uint32_t>(kWgmmaBlockBytes), mbar);
        }
        return;
      }
      const int n = lt >> 1, half = lt & 1;
      const i64 j = jt + n;
      i64 ph = -1;
      if (j < kb) {
        if (p.bt) {
          const i64 page = p.bt[bb * p.tw + j / p.ps];
          ph = page >= 0 && page < p.num_pages ? page * p.ps + j % p.ps : -1;
        } else if (j < p.P) {
          ph = j;
        }
      }
      const unsigned char* src = p.blocks + (ph >= 0 ? ph / kKeys : p.zero_block) * kWgmmaBlockBytes;
      const int r = ph >= 0 ? static_cast<int>(ph % kKeys) : 0;
      constexpr int mine = D / 32;  // 16-byte chunks per plane and thread
#pragma unroll
      for (int pl = 0; pl < kPlanes; ++pl)
#pragma unroll
        for (int c = half * mine; c < (half + 1) * mine; ++c)
          cp16(Ab + pl * kPlaneBytes + cm_off(n, c * 16, D), src + pl * kPlaneBytes + cm_off(r, c * 16, D), true);
      cp_commit();
      if (half == 0) {
        reinterpret_cast<float*>(Ab + kScaleOff)[n] = *reinterpret_cast<const float*>(src + kScaleOff + 4 * r);
        Ab[kNanOff + n] = src[kNanOff + r];
      }
    };
    const i64 ntiles = (kb - ka + kKeys - 1) / kKeys;
    const i64 turns = (ntiles + 1) / 2;  // every warpgroup runs the same number of rounds (a last one may be empty)
    if (loader && blk < ntiles) issue(blk);
    int R[NW / 2], T[NW / 2];
    Pending pend;
    const std::uint64_t ad = mdesc(A, 128, 8 * D), bd = mdesc(B + part * NW * D, 128, 8 * D);  // this warpgroup's columns
    for (i64 u = 0; u < turns; ++u) {
      const i64 t = blk + 2 * u;
      const bool real = t < ntiles;
      if (real) {
        if (p.bulk) {
          mbar_wait(mbar, parity);
          parity ^= 1u;
        } else {
          if (loader) cp_wait_all();
          proxy_fence();
        }
        block_barrier<PAIR>(blk);
      }
      if (real) {
        // R = X = 65 P1 - 63 Pm1 and T = Y = c0 + 64 (c1 - 64 c4), s 2^18 = 2048 X - 4095 Y (logits_wgmma.hpp):
        // R = P1, T = Pm1; R = 65 R - 63 T; T = c4; T *= -64; T += c1; T *= 64; T += c0.
        // (P1 and Pm1 as two groups, 65 R while Pm1 completes: ptxas then reads T into 63 T first and forms R after
        // the next round is issued.)
        wg_fence();
        unit<NW, NT>(R, ad, bd, 3, 3, false);
        wg_commit();
        unit<NW, NT>(T, ad, bd, 4, 4, false);
        wg_commit();
        wg_wait1();
        fence_all<NW>(R);
#pragma unroll
        for (int i = 0; i < NW / 2; ++i) R[i] *= 65;
        wg_wait0();
        fence_all<NW>(T);
#pragma unroll
        for (int i = 0; i < NW / 2; ++i) R[i] -= 63 * T[i];
        wg_fence();
        unit<NW, NT>(T, ad, bd, 2, 2, false);
        wg_commit();
        wg_wait0();
        fence_all<NW>(T);
        int m64 = -64;  // opaque to the compiler: one IMAD a score, not a shift and a negation
        reg_fence(m64);
#pragma unroll
        for (int i = 0; i < NW / 2; ++i) T[i] *= m64;
        wg_fence();
        unit<NW, NT>(T, ad, bd, 1, 0, true);
        unit<NW, NT>(T, ad, bd, 0, 1, true);
        wg_commit();
        wg_wait0();
        fence_all<NW>(T);
#pragma unroll
        for (int i = 0; i < NW / 2; ++i) T[i] *= 64;
        wg_fence();
        unit<NW, NT>(T, ad, bd, 0, 0, true);
        wg_commit();
        wg_wait0();
        fence_all<NW>(T);
        fence_all<NW>(R);
      }
      if (!real) break;
      // The tile's scales and NaN flags of this thread's keys, before the block reloads.
      const int k0 = 16 * warp + gid;
      const bool kn0 = Akn[k0] != 0, kn1 = Akn[k0 + 8] != 0;
      const float sc0 = Asc[k0], sc1 = Asc[k0 + 8];
      block_barrier<PAIR>(blk);  // every warp's reads of the block are done: reload it during the epilogue
      if (loader && t + 2 < ntiles) issue(t + 2);
      const bool nans = __any_sync(0xFFFFFFFFu, group_nan || kn0 || kn1);  // warp-uniform
      const int c0 = part * NW, q0 = part * RBW;  // this warpgroup's first column and row of the group
      const int nrw = nr - q0 < 0 ? 0 : nr - q0 > RBW ? RBW : nr - q0;
      const TileCtx x{p, ka + t * kKeys, kb, r0 + q0, nrw, k0, tig, kn0, kn1, sc0, sc1, qn + c0, wsm + c0, wab + c0, rlo + q0, rhi + q0, rc0 + q0};
      if (nans) epilogue<NW, H, true>(x, R, T, pend, u & 1);
      else epilogue<NW, H, false>(x, R, T, pend, u & 1);
    }
    const i64 mine = blk < ntiles ? (ntiles - blk + 1) / 2 : 0;  // this warpgroup's tiles of the segment
    if (RBW == 1 && (mine & 1) && tig < 2) {  // its last tile's logits were kept for a pass that never came
      const int q0 = part * RBW, nrw = nr - q0 < 0 ? 0 : nr - q0 > RBW ? RBW : nr - q0;
      const TileCtx x{p, 0, kb, r0 + q0, nrw, 0, tig, false, false, 0.0f, 0.0f, qn, wsm, wab, rlo + q0, rhi + q0, rc0 + q0};
      store_logit<H>(x, 0, ka + (blk + 2 * (mine - 1)) * kKeys + 16 * warp + gid + 8 * (tig & 1), pend.a, pend.m, pend.sc);
    }
  }
}

// Tile blocks of the keys (logits_wgmma.hpp): key p's codes as five digit planes in the core-matrix layout of block
// p / 64, its scale and NaN flag; ragged keys (src: [P, D] codes, scale: [P]) or the planar paged cache (page_bytes).
__global__ void blocks_kernel(const std::uint8_t* src, const float* scale, i64 P, i64 ps, i64 page_bytes, bool paged,
                              unsigned char* blocks) {
  constexpr int D = kD;
  for (i64 e = blockIdx.x * static_cast<i64>(blockDim.x) + threadIdx.x; e < P * D; e += static_cast<i64>(gridDim.x) * blockDim.x) {
    const i64 t = e / D;
    const int d = static_cast<int>(e % D), r = static_cast<int>(t % kKeys);
    const std::uint8_t c = paged ? src[(t / ps) * page_bytes + (t % ps) * D + d] : src[t * D + d];
    unsigned char* blk = blocks + (t / kKeys) * kWgmmaBlockBytes;
    const exactdot::Digits g = exactdot::digits(exactdot::scaled_int(c));
    const int off = cm_off(r, d, D);
    blk[off] = static_cast<unsigned char>(g.d[0]);
    blk[kPlaneBytes + off] = static_cast<unsigned char>(g.d[1]);
    blk[2 * kPlaneBytes + off] = static_cast<unsigned char>(g.d[2]);
    blk[3 * kPlaneBytes + off] = static_cast<unsigned char>(exactdot::toom_p1(g));
    blk[4 * kPlaneBytes + off] = static_cast<unsigned char>(exactdot::toom_m1(g));
    if (exactdot::is_nan_code(c)) blk[kNanOff + r] = 1;
    if (d == 0) {
      float sc;
      if (paged) memcpy(&sc, src + (t / ps) * page_bytes + ps * D + 4 * (t % ps), 4);
      else sc = scale[t];
      reinterpret_cast<float*>(blk + kScaleOff)[r] = sc;
    }
  }
}
#endif  // DSA_WG_BODY

#ifndef DSA_WG_BODY
// Host pass and other targets: empty kernels of the same signatures (never launched there).
template <int NT, int H, int WG>
__global__ void wgmma_logits_kernel(const WgmmaParams) {}
__global__ void blocks_kernel(const std::uint8_t*, const float*, i64, i64, i64, bool, unsigned char*) {}
#endif

// Probe: 1 when the device ran the sm_90a image.
__global__ void probe_kernel(int* out) {
#ifdef DSA_WG_BODY
  *out = 1;
#else
  *out = 0;
#endif
}

template <int NT, int H, int WG>
const char* launch(const WgmmaParams& p) {
  const Smem L{NT};
  const int smem = L.bytes();
  if (cudaFuncSetAttribute(wgmma_logits_kernel<NT, H, WG>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
    return cudaGetErrorString(cudaGetLastError());
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  const i64 grid = p.nitems < sms ? p.nitems : sms;
  if (grid <= 0) return "";
  wgmma_logits_kernel<NT, H, WG><<<static_cast<unsigned>(grid), 128 * WG, smem>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

}  // namespace

bool wgmma_engine_available() {
  static const bool ok = [] {
    int dev = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess) return false;
    if (prop.major != 9 || prop.minor != 0) return false;
    int* d = nullptr;
    int h = 0;
    if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) return false;
    probe_kernel<<<1, 1>>>(d);
    const bool ran = cudaGetLastError() == cudaSuccess && cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess;
    cudaFree(d);
    if (!ran) cudaGetLastError();  // clear: no image for this device
    return ran && h == 1;
  }();
  return ok;
}

const char* wgmma_build_blocks(const std::uint8_t* src, const float* scale, std::int64_t P, std::int64_t ps, std::int64_t page_bytes,
                               bool paged, unsigned char* blocks) {
  if (P <= 0) return "";
  const i64 n = P * kD;
  blocks_kernel<<<static_cast<unsigned>(std::min<i64>((n + 255) / 256, 65536)), 256>>>(src, scale, P, ps, page_bytes, paged, blocks);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

bool wgmma_engine_supports(int H, int D, int NT) {
  return D == kD && (NT == 64 || NT == 128) && (H == 16 || H == 32 || H == 64 || H == 128) && H <= NT;
}

const char* wgmma_engine_launch(const WgmmaParams& p) {
  if (!wgmma_engine_supports(p.H, p.D, p.NT)) return "wgmma engine: unsupported H / D / N";
  // NT 128 with H <= 64: four warpgroups, two to a tile block (p.warpgroups 2: the two-warpgroup kernel).
  if (p.warpgroups != 2 && p.warpgroups != 4) return "wgmma engine: warpgroups must be 2 or 4";
  const bool quad = p.warpgroups == 4;
  switch (p.NT * 1000 + p.H) {
    case 64016: return launch<64, 16, 2>(p);
    case 64032: return launch<64, 32, 2>(p);
    case 64064: return launch<64, 64, 2>(p);
    case 128016: return quad ? launch<128, 16, 4>(p) : launch<128, 16, 2>(p);
    case 128032: return quad ? launch<128, 32, 4>(p) : launch<128, 32, 2>(p);
    case 128064: return quad ? launch<128, 64, 4>(p) : launch<128, 64, 2>(p);
    case 128128: return launch<128, 128, 2>(p);  // a row's 128 heads are one chain of head lanes: not split
    default: return "wgmma engine: unsupported H / N";
  }
}

}  // namespace dsa::engines::logits
