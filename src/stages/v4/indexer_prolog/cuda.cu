// v4.indexer_prolog on the GPU: the row loops of the reference (RowLoops) with core.hpp's DSA_HD functions (built with
// --fmad=false, IEEE division): identical bytes (dsa-check backend-diff).
//   q_pre path, in chunks of rows: one thread per row runs prep_row (RoPE, the row's stats, the fwht FWHT) into
//   scratch, then one thread per output element runs rot_elem (its Hadamard sum in index order, rounding, bound)
//   dynamic_quant_int8: one thread per row; A3 weights: one thread per value
// The k cache scatter stays on the host (a data move of the downloaded codes).
#include <cstdint>

#include "backend/cuda.hpp"
#include "stages/v4/indexer_prolog/cuda.hpp"

namespace dsa::v4::indexer_prolog {

namespace {

using i64 = std::int64_t;
constexpr int kThreads = 128;
// Scratch of one chunk of q_pre rows: r, lo, hi (bf16) and f (fp32), 10 bytes per element, at most 2^24 elements.
constexpr i64 kChunkElems = i64{1} << 24;

unsigned blocks_for(i64 n) {  // grid-stride loops below: at most 65535 blocks
  const i64 b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 65535 ? 65535 : b));
}

// Rows [r0, r0 + n) of pre; scratch row j = row r0 + j.
__global__ void prep_kernel(const std::uint16_t* pre, i64 r0, i64 n, i64 H, i64 D, const float* cs, const float* sn, HadamardKind kind,
                            std::uint16_t* r, std::uint16_t* lo, std::uint16_t* hi, float* f, RowStats* stats) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 j = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += stride) {
    const i64 row = r0 + j, t = row / H;
    stats[j] = prep_row(pre + row * D, D, cs + t * 32, sn + t * 32, kind, Bug::none, r + j * D, lo + j * D, hi + j * D,
                        f ? f + j * D : nullptr);
  }
}

__global__ void elem_kernel(i64 r0, i64 n, i64 D, HadamardKind kind, const std::uint16_t* r, const std::uint16_t* lo,
                            const std::uint16_t* hi, const float* f, const RowStats* stats, float s32, std::uint16_t* out, double* bound) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 id = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; id < n * D; id += stride) {
    const i64 j = id / D, i = id % D, o = (r0 + j) * D + i;
    rot_elem(i, D, kind, r + j * D, lo + j * D, hi + j * D, f ? f + j * D : nullptr, stats[j], s32, Bug::none, out + o, bound + o);
  }
}

__global__ void quant_kernel(const std::uint16_t* x, i64 R, i64 D, AmaxZero az, std::int8_t* codes, std::uint16_t* scales) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 row = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; row < R; row += stride)
    scales[row] = scale_fp16(dynamic_quant_int8(x + row * D, D, az, codes + row * D, Bug::none));
}

__global__ void weights_kernel(const std::uint16_t* w, i64 n, std::uint16_t* out) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) out[i] = a3_weight(w[i], Bug::none);
}

// Kernel vllm-cuda: one thread per (token, head) row; r / lo / hi scratch in registers / local memory (D = 128).
__global__ void vllm_q_kernel(const std::uint16_t* x, i64 rows, i64 H, i64 D, const float* cs, const float* sn, const float* w, float sm,
                              float hs, std::uint8_t* codes, double* bound, float* wout, double* wbound) {
  const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
  std::uint16_t r[128], lo[128], hi[128];
  for (i64 row = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; row < rows; row += stride) {
    const i64 t = row / H;
    vllm_q_row(x + row * D, D, cs + t * 32, sn + t * 32, w[row], sm, hs, Bug::none, r, lo, hi, codes + row * D, bound + row * D,
               wout + row, wbound + row);
  }
}

template <class P>
P* dev(const cuda::Buffer& b) {
  return static_cast<P*>(b.get());
}

}  // namespace

void rotate_rows_cuda(const std::uint16_t* pre, i64 T, i64 H, i64 D, const float* cs, const float* sn, HadamardKind kind,
                      std::uint16_t* out, double* bound) {
  const i64 rows = T * H;
  const auto n = static_cast<std::size_t>(rows * D), n_cs = static_cast<std::size_t>(T * 32);
  cuda::Buffer dpre(n * 2), dcs(n_cs * 4), dsn(n_cs * 4), dout(n * 2), dbound(n * 8);
  dpre.upload(pre, n * 2);
  dcs.upload(cs, n_cs * 4);
  dsn.upload(sn, n_cs * 4);
  const i64 chunk = rows < 1 ? 1 : (kChunkElems / D < 1 ? 1 : (kChunkElems / D < rows ? kChunkElems / D : rows));
  const auto ce = static_cast<std::size_t>(chunk * D);
  const bool fwht = kind == HadamardKind::fwht;
  cuda::Buffer dr(ce * 2), dlo(ce * 2), dhi(ce * 2), df(fwht ? ce * 4 : 1), dst(static_cast<std::size_t>(chunk) * sizeof(RowStats));
  float* fp = fwht ? dev<float>(df) : nullptr;
  const float s32 = dsa::num::hadamard_scale_f32(D);
  for (i64 r0 = 0; r0 < rows; r0 += chunk) {
    const i64 m = rows - r0 < chunk ? rows - r0 : chunk;
    prep_kernel<<<blocks_for(m), kThreads>>>(dev<const std::uint16_t>(dpre), r0, m, H, D, dev<const float>(dcs), dev<const float>(dsn), kind,
                                             dev<std::uint16_t>(dr), dev<std::uint16_t>(dlo), dev<std::uint16_t>(dhi), fp,
                                             dev<RowStats>(dst));
    cuda::check_last("v4.indexer_prolog rotation (rows)");
    elem_kernel<<<blocks_for(m * D), kThreads>>>(r0, m, D, kind, dev<const std::uint16_t>(dr), dev<const std::uint16_t>(dlo),
                                                 dev<const std::uint16_t>(dhi), fp, dev<const RowStats>(dst), s32,
                                                 dev<std::uint16_t>(dout), dev<double>(dbound));
    cuda::check_last("v4.indexer_prolog rotation (elements)");
  }
  dout.download(out, n * 2);
  dbound.download(bound, n * 8);
}

void quant_rows_cuda(const std::uint16_t* x, i64 R, i64 D, AmaxZero az, std::int8_t* codes, std::uint16_t* scales) {
  const auto n = static_cast<std::size_t>(R * D), nr = static_cast<std::size_t>(R);
  cuda::Buffer dx(n * 2), dc(n), ds(nr * 2);
  dx.upload(x, n * 2);
  if (R > 0) {
    quant_kernel<<<blocks_for(R), kThreads>>>(dev<const std::uint16_t>(dx), R, D, az, dev<std::int8_t>(dc), dev<std::uint16_t>(ds));
    cuda::check_last("v4.indexer_prolog dynamic_quant_int8");
  }
  dc.download(codes, n);
  ds.download(scales, nr * 2);
}

void weights_cuda(const std::uint16_t* w, i64 n, std::uint16_t* out) {
  const auto nb = static_cast<std::size_t>(n) * 2;
  cuda::Buffer dw(nb), dout(nb);
  dw.upload(w, nb);
  if (n > 0) {
    weights_kernel<<<blocks_for(n), kThreads>>>(dev<const std::uint16_t>(dw), n, dev<std::uint16_t>(dout));
    cuda::check_last("v4.indexer_prolog A3 weights");
  }
  dout.download(out, nb);
}

void vllm_q_cuda(const std::uint16_t* x, i64 T, i64 H, i64 D, const float* cs, const float* sn, const float* w, float sm, float hs,
                 std::uint8_t* codes, double* bound, float* wout, double* wbound) {
  const i64 rows = T * H;
  const auto n = static_cast<std::size_t>(rows * D), nr = static_cast<std::size_t>(rows), n_cs = static_cast<std::size_t>(T * 32);
  cuda::Buffer dx(n * 2), dcs(n_cs * 4), dsn(n_cs * 4), dw(nr * 4), dc(n), db(n * 8), dwo(nr * 4), dwb(nr * 8);
  dx.upload(x, n * 2);
  dcs.upload(cs, n_cs * 4);
  dsn.upload(sn, n_cs * 4);
  dw.upload(w, nr * 4);
  if (rows > 0) {
    vllm_q_kernel<<<blocks_for(rows), kThreads>>>(dev<const std::uint16_t>(dx), rows, H, D, dev<const float>(dcs), dev<const float>(dsn),
                                                  dev<const float>(dw), sm, hs, dev<std::uint8_t>(dc), dev<double>(db), dev<float>(dwo),
                                                  dev<double>(dwb));
    cuda::check_last("v4.indexer_prolog vllm-cuda q path");
  }
  dc.download(codes, n);
  db.download(bound, n * 8);
  dwo.download(wout, nr * 4);
  dwb.download(wbound, nr * 8);
}

}  // namespace dsa::v4::indexer_prolog
