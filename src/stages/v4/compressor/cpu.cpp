// v4.compressor reference: projections in parallel over tokens (on the CPU micro-kernel, or the GPU's from cuda.cpp:
// the same fma chains, cuda.hpp), entries in parallel over output rows on the host; every value in one fixed fp64
// order (det_exp), rounded at the variant's rounding points (stage.hpp).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "numerics/det_math.hpp"
#include "numerics/dequant_vec.hpp"
#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"
#include "numerics/half_core.hpp"
#include "engines/quant/quant_core.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"
#include "engines/v4_compress/norm_rope_core.hpp"
#include "engines/v4_compress/pool.hpp"
#include "stages/v4/compressor/stage.hpp"

namespace dsa::v4::compressor {
namespace {

constexpr double kU = 0x1p-24;
// gam, bf16v, rb: the compressors' shared bound helpers (engines/v4_compress/norm_rope_core.hpp).
using engines::v4_compress::core::bf16v;
using engines::v4_compress::core::gam;
using engines::v4_compress::core::rb;

// e2m1 (FP4) RNE with clamp to +-6: the grid {0, .5, 1, 1.5, 2, 3, 4, 6}, ties to the even code.
double e2m1(double x) {
  static const double g[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  const double a = std::min(std::fabs(x), 6.0);
  int k = 0;
  for (int i = 1; i < 8; ++i)
    if (a >= g[i]) k = i;
  double q = g[k];
  if (k < 7) {
    const double mid = (g[k] + g[k + 1]) / 2;
    if (a > mid || (a == mid && (k & 1))) q = g[k + 1];
  }
  return std::signbit(x) ? -q : q;
}

// One QAT block (ue8m0 scale): fp8 (qmax 448, amax floor 1e-4) or fp4 (qmax 6, floor 6 * 2^-126). y = bf16(Q(x/s) s);
// ey = the largest distance to any candidate a kernel within the bounds can produce (scale and value flips).
void qat_block(double* y, double* ey, std::int64_t n, bool fp4) {
  const float floor_ = fp4 ? 6.0f * 0x1p-126f : 1e-4f, inv = fp4 ? 1.0f / 6.0f : num::inv448_f32();
  const double qmax = fp4 ? 6.0 : 448.0;
  auto scale = [&](double amax) {  // fp8: the ue8m0 ScaleRule (engines/quant); fp4: the same form at qmax 6
    if (!fp4) return static_cast<double>(quant::scale_of(quant::ue8m0_rule(), static_cast<float>(amax)));
    return static_cast<double>(num::pow2_ceil(std::fmax(static_cast<float>(amax), floor_) * inv));
  };
  auto q = [&](double x, double s) {
    const double t = std::clamp(x / s, -qmax, qmax);
    return bf16v((fp4 ? e2m1(t) : num::e4m3_to_f64(num::f64_to_e4m3(t))) * s);
  };
  double amax = 0, lo = 0, hi = 0;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    nan |= std::isnan(y[i]);
    amax = std::max(amax, std::fabs(y[i]));
    lo = std::max(lo, std::fabs(y[i]) - ey[i]);
    hi = std::max(hi, std::fabs(y[i]) + ey[i]);
  }
  if (nan) {
    for (std::int64_t i = 0; i < n; ++i) y[i] = std::numeric_limits<double>::quiet_NaN(), ey[i] = 0;
    return;
  }
  const double s = scale(amax), s_lo = scale(lo), s_hi = scale(hi);
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = q(y[i], s);
    double e = 0;
    if (ey[i] > 0 || s_lo != s_hi)
      for (double sc = s_lo; sc <= s_hi; sc *= 2)
        for (double x : {y[i] - ey[i], y[i], y[i] + ey[i]}) e = std::max(e, std::fabs(q(x, sc) - v));
    y[i] = v, ey[i] = e;
  }
}

// One NVFP4 QAT block of 16 (spec v41 §3): y (the kernel's source values: bf16 (ref) or the fp32 result (vllm)) -> the
// dequantized e2m1 * e4m3 scale (exact in bf16); ey -> the largest distance to what a kernel whose source values lie
// within ey can produce: every e4m3 scale between those of the smallest and largest possible amax, and per scale the
// codes of both ends of the interval (the code is monotone in x).
void nvfp4_qat_block(double* y, double* ey, fp4core::Nv4Rule rule) {
  float xs[16];
  double lo = 0, hi = 0;
  bool finite = true;
  for (int i = 0; i < 16; ++i) {
    xs[i] = static_cast<float>(y[i]);  // exact: y is a bf16 value or the fp32 the kernel holds (rounded here)
    finite = finite && std::isfinite(y[i]) && std::isfinite(ey[i]);
    lo = std::max(lo, std::fabs(y[i]) - ey[i]);
    hi = std::max(hi, std::fabs(y[i]) + ey[i]);
  }
  const fp4core::E2m1Opts o{};
  std::uint8_t packed[8], sb = 0;
  fp4core::nvfp4_block(xs, packed, &sb, rule, o);
  const double s = static_cast<double>(halfcore::e4m3_to_f32(sb));
  double v[16];
  for (int i = 0; i < 16; ++i) v[i] = static_cast<double>(fp4core::e2m1_to_f32(static_cast<std::uint8_t>((packed[i / 2] >> (4 * (i % 2))) & 0xFu))) * s;
  if (!finite || !std::isfinite(s)) {
    for (int i = 0; i < 16; ++i) y[i] = v[i], ey[i] = 0;
    return;
  }
  auto scale_byte = [&](double amax) {  // the rule's scale of a block whose amax is `amax`
    float b[16] = {};
    b[0] = static_cast<float>(amax);
    std::uint8_t pk[8], sc = 0;
    fp4core::nvfp4_block(b, pk, &sc, rule, o);
    return sc;
  };
  // fp32 values of amax within [lo, hi]: rounding lo down / hi up keeps the range conservative.
  const std::uint8_t s_lo = scale_byte(std::nextafter(static_cast<double>(static_cast<float>(lo)), 0.0)), s_hi = scale_byte(hi * (1 + 0x1p-23));
  // The fp32 values a kernel can hold in [lo, hi] lie in [up32(lo), down32(hi)]; its quotient fl32(x / s) (div_rn)
  // and the e2m1 code are monotone in x, so the codes of those two ends are the extremes (exactly: an exact tie
  // stays a tie).
  auto up32 = [](double w) {
    const float f = static_cast<float>(w);
    return static_cast<double>(f) < w ? std::nextafter(f, INFINITY) : f;
  };
  auto down32 = [](double w) {
    const float f = static_cast<float>(w);
    return static_cast<double>(f) > w ? std::nextafter(f, -INFINITY) : f;
  };
  auto code = [&](float x, float sc) { return static_cast<double>(fp4core::e2m1_to_f32(fp4core::f32_to_e2m1(fp4core::clampf(x / sc, -6.0f, 6.0f), o))); };
  for (int i = 0; i < 16; ++i) {
    double e = 0;
    const float xl = up32(y[i] - ey[i]), xh = down32(y[i] + ey[i]);
    for (unsigned b = std::min(s_lo, sb); b <= std::max(s_hi, sb) && b < 0x7F; ++b) {
      const float sc = halfcore::e4m3_to_f32(static_cast<std::uint8_t>(b));
      if (!(sc > 0)) continue;
      e = std::max({e, std::fabs(code(xl, sc) * sc - v[i]), std::fabs(code(xh, sc) * sc - v[i])});
    }
    y[i] = v[i], ey[i] = e;
  }
}

}  // namespace

Slot state_slot(const Params& p, const std::int32_t* table_row, std::int64_t pos, Bug bug) {
  const std::int64_t ring = p.ring > 0 ? p.ring : p.coff * p.r;
  const std::int64_t q = p.cache_mode == 2 ? (pos + (bug == Bug::ring_off_by_one ? 1 : 0)) % ring : pos;
  const std::int64_t bi = q / p.bs;
  if (pos < 0 || bi >= p.maxblk) return {};
  return {table_row[bi], q % p.bs};
}

void pool(const Params& p, const std::vector<RowRef>& rows, Bug bug, double* C, double* eC) {
  using PB = engines::v4_compress::PoolBug;
  const PB b = bug == Bug::halves_swapped ? PB::halves_swapped : bug == Bug::prev_not_masked ? PB::prev_not_masked
               : bug == Bug::softmax_over_channels ? PB::softmax_over_channels : PB::none;
  engines::v4_compress::pool(p.D, p.coff, rows, b, C, eC);
}
void finish(const Params& p, const double* C, const double* eC, const std::uint16_t* gamma_bf16, const float* cos_row,
            const float* sin_row, double* y, double* ey) {
  const std::int64_t D = p.D, nope = p.D - p.rope;
  const bool ref = p.variant == Variant::ref;
  engines::v4_compress::norm_rope(p.D, p.rope, p.eps, p.pooled_bf16, ref, C, eC, gamma_bf16, cos_row, sin_row, y, ey);
  if (p.v41 && p.variant == Variant::vllm_cuda) {
    // vLLM's V4.1 store quantizes the fp32 RoPE result without a bf16 rounding (spec v41 §3 rounding source).
    for (std::int64_t c = 0; c < D; c += 16) nvfp4_qat_block(y + c, ey + c, fp4core::Nv4Rule::vllm);
    return;
  }
  for (std::int64_t c = 0; c < D; ++c) ey[c] = rb(y[c], ey[c]), y[c] = bf16v(y[c]);  // the output cast
  if (p.v41) {
    if (ref)
      for (std::int64_t c = 0; c < D; c += 16) nvfp4_qat_block(y + c, ey + c, fp4core::Nv4Rule::ref);
    return;
  }
  if (p.variant == Variant::vllm_cuda) {
    // vLLM's CUDA store (fused_compress_quant_cache.py): no Hadamard whatever `rotate` says. D 128 (indexer): one FP8
    // block over the bf16 rounding of all 128 dims (RoPE'd); D 512 (main): blocks of 64 over the nope dims.
    if (D == 128) qat_block(y, ey, D, false);
    else
      for (std::int64_t b0 = 0; b0 < nope; b0 += 64) qat_block(y + b0, ey + b0, 64, false);
    return;
  }
  if (p.rotate) {  // Hadamard-128 over all dims
    std::vector<double> t(static_cast<std::size_t>(D)), et(static_cast<std::size_t>(D));
    const double scale = static_cast<double>(num::f32_from_bits(0x3DB504F3u)), sumabs = [&] {
      double s = 0;
      for (std::int64_t k = 0; k < D; ++k) s += std::fabs(y[k]);
      return s;
    }();
    double esum = 0;
    for (std::int64_t k = 0; k < D; ++k) esum += ey[k];
    for (std::int64_t i = 0; i < D; ++i) {
      double acc = 0;
      for (std::int64_t k = 0; k < D; ++k) acc += (__builtin_popcountll(static_cast<unsigned long long>(i & k)) & 1) ? -y[k] : y[k];
      t[i] = acc;
      et[i] = esum + gam(static_cast<double>(D)) * sumabs;
    }
    for (std::int64_t i = 0; i < D; ++i) {
      if (ref) {  // fp32 transform and scale, one bf16 cast
        const double v = t[i] * scale;
        y[i] = bf16v(v), ey[i] = rb(v, et[i] * scale + kU * std::fabs(v));
      } else {  // ascend: bf16(x @ H^T), then bf16(. * 128^-0.5)
        const double e1 = rb(t[i], et[i]), v1 = bf16v(t[i]), v2 = v1 * scale;
        y[i] = bf16v(v2), ey[i] = rb(v2, e1 * scale + kU * std::fabs(v2));
      }
    }
    if (ref)
      for (std::int64_t b0 = 0; b0 < D; b0 += 32) qat_block(y + b0, ey + b0, 32, true);
  } else if (p.variant != Variant::ascend_a3) {
    for (std::int64_t b0 = 0; b0 < nope; b0 += 64) qat_block(y + b0, ey + b0, 64, false);
  }
}

StepResult run_step(const Case& c, const Params& p, Bug bug, int threads, Projector project) {
  const std::int64_t T = p.T, C2 = p.C2, D = p.D, R = p.R;
  const Tensor& cu = c.input("cu_seqlens");
  const Tensor& sp = c.input("start_pos");
  const Tensor& table = c.input("state_block_table");
  const Tensor& st_in = c.input("state_cache_in");
  const std::int32_t* tab = table.data<std::int32_t>();
  // Token -> request and position.
  std::vector<std::int64_t> req(static_cast<std::size_t>(T)), pos(static_cast<std::size_t>(T));
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t t = cu.int_at(b); t < cu.int_at(b + 1); ++t)
      req[static_cast<std::size_t>(t)] = b, pos[static_cast<std::size_t>(t)] = sp.int_at(b) + t - cu.int_at(b);
  // Projections of this step's tokens (fp32 values) and their bounds. The GEMMs run on the attention
  // engine's micro-kernel (fma chain in increasing h per element: the same bits for any thread count), 64 tokens
  // per block; the bound uses |x_t|_2 |w_o|_2 >= sum_h |x_th w_oh| (Cauchy-Schwarz).
  // KV and S are fp32 values: held as floats, every element written below (not zeroed first: at a 32K prefill they are
  // 256 MiB, and fresh pages cost more than the stores). Their bounds are not held per element but formed where read
  // (ebounds): (H + 2) u |x_t|_2 |w_o|_2 from the token's norm and the output's, the score's plus u |s| where the
  // projection bound is positive; 0 for projections given as inputs.
  std::unique_ptr<float[]> KV(new float[static_cast<std::size_t>(std::max<std::int64_t>(T * C2, 1))]),
      S(new float[static_cast<std::size_t>(std::max<std::int64_t>(T * C2, 1))]);
  std::vector<double> xnorm(static_cast<std::size_t>(T), 0.0), nk(static_cast<std::size_t>(p.have_x ? C2 : 0)), ng(nk.size());
  const double ecoef = static_cast<double>(p.H + 2) * kU;
  auto ebounds = [&](std::int64_t t, std::int64_t o, double& ekv, double& es) {
    if (!p.have_x) {
      ekv = 0.0, es = 0.0;
      return;
    }
    const double xn = xnorm[static_cast<std::size_t>(t)];
    ekv = ecoef * xn * nk[static_cast<std::size_t>(o)];
    const double eg = ecoef * xn * ng[static_cast<std::size_t>(o)];
    es = eg + (eg > 0 ? kU * std::fabs(static_cast<double>(S[static_cast<std::size_t>(t * C2 + o)])) : 0.0);
  };
  const float* apep = p.have_ape ? c.input("ape").data<float>() : nullptr;  // V4.1: no APE
  auto store = [&](std::int64_t t, std::int64_t o, double kv, double g) {
    const std::size_t f = static_cast<std::size_t>(t * C2 + o);
    KV[f] = static_cast<float>(kv);
    S[f] = apep ? static_cast<float>(g) + apep[(pos[static_cast<std::size_t>(t)] % p.r) * C2 + o] : static_cast<float>(g);
  };
  if (p.have_x) {
    const std::int64_t Hh = p.H;
    std::vector<double> Pk(static_cast<std::size_t>(C2 * Hh)), Pg(Pk.size());
    const std::uint16_t* wk = c.input("wkv").data<std::uint16_t>();
    // Ratio 1 has no gate: a zero gate (score 0, bound 0; the softmax of one row is 1 whatever the score).
    std::vector<std::uint16_t> no_gate(p.have_gate ? 0 : static_cast<std::size_t>(C2 * Hh), 0);
    const std::uint16_t* wg = p.have_gate ? c.input("wgate").data<std::uint16_t>() : no_gate.data();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t o = 0; o < C2; ++o) {
      double a = 0, b = 0;
      for (std::int64_t h = 0; h < Hh; ++h) {
        const double k = halfcore::bf16_to_f64(wk[o * Hh + h]), g = halfcore::bf16_to_f64(wg[o * Hh + h]);
        Pk[static_cast<std::size_t>(((o / 8) * Hh + h) * 8 + o % 8)] = k;
        Pg[static_cast<std::size_t>(((o / 8) * Hh + h) * 8 + o % 8)] = g;
        a += k * k, b += g * g;
      }
      nk[static_cast<std::size_t>(o)] = std::sqrt(a) * (1 + 0x1p-40), ng[static_cast<std::size_t>(o)] = std::sqrt(b) * (1 + 0x1p-40);
    }
    const std::uint16_t* xb = c.input("x").data<std::uint16_t>();
    // Tokens t0 .. t0 + nt with their projections Sk / Sg (ld C2): the fp32 values, ape and the bounds.
    auto emit = [&](std::int64_t t0, std::int64_t nt, const double* Sk, const double* Sg) {
#pragma omp parallel for schedule(static) num_threads(threads) if (!omp_in_parallel())
      for (std::int64_t i = 0; i < nt; ++i) {
        double xn = 0;
        for (std::int64_t h = 0; h < Hh; ++h) {
          const double xv = halfcore::bf16_to_f64(xb[(t0 + i) * Hh + h]);
          xn += xv * xv;
        }
        xnorm[static_cast<std::size_t>(t0 + i)] = std::sqrt(xn) * (1 + 0x1p-40);
        for (std::int64_t o = 0; o < C2; ++o) store(t0 + i, o, Sk[static_cast<std::size_t>(i * C2 + o)], Sg[static_cast<std::size_t>(i * C2 + o)]);
      }
    };
    if (project) {
      project(xb, T, Hh, wk, wg, C2, emit);  // another backend's projections (cuda.cpp: the GPU's)
    } else {
      // Up to 256 tokens a block (the weight panels, C2 x H doubles: 32 MB at V4-Flash sizes, stream from memory
      // once per block: a larger block reads them less often), at least 64, and at least two blocks per thread when
      // there are enough tokens. Each token row's chain is the same in any block.
      const std::int64_t two_each = 2 * std::max(threads, 1), per = (T + two_each - 1) / two_each;
      const std::int64_t kTB = std::clamp<std::int64_t>((per + 7) / 8 * 8, 64, 256);
#pragma omp parallel num_threads(threads)
      {
        // Token rows 8 doubles longer than Hh: the rows of a head block fall in different L1 sets (attn_gemm.cpp).
        const std::int64_t ldq = Hh + 8;
        std::vector<double> Q(static_cast<std::size_t>(kTB * ldq)), Sk(static_cast<std::size_t>(kTB * C2)), Sg(Sk.size());
#pragma omp for schedule(dynamic, 1)
        for (std::int64_t t0 = 0; t0 < T; t0 += kTB) {
          const std::int64_t nt = std::min(kTB, T - t0);
          const std::int64_t np4 = (nt + 3) / 4 * 4;  // the rows computed (gemm_qk: a multiple of 4)
          std::fill(Q.begin(), Q.begin() + np4 * ldq, 0.0);
          for (std::int64_t i = 0; i < nt; ++i) num::bf16_to_f64_n(xb + (t0 + i) * Hh, Hh, Q.data() + i * ldq);
          attn::gemm_qk(Q.data(), np4, Pk.data(), C2, Hh, Sk.data(), attn::gemm_isa(), ldq);
          if (p.have_gate) attn::gemm_qk(Q.data(), np4, Pg.data(), C2, Hh, Sg.data(), attn::gemm_isa(), ldq);
          else std::fill(Sg.begin(), Sg.end(), 0.0);
          emit(t0, nt, Sk.data(), Sg.data());  // inside the parallel region: one thread
        }
      }
    }
  } else {
    const Tensor& kp = c.input("kv_proj");
    const float* sg = p.have_gate ? c.input("score_proj").data<float>() : nullptr;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (std::int64_t t = 0; t < T; ++t)
      for (std::int64_t o = 0; o < C2; ++o) store(t, o, kp.data<float>()[t * C2 + o], sg ? sg[t * C2 + o] : 0.0);
  }
  StepResult out;
  // State rows: copy of the input, every processed token's row written where its table entry is not 0 (in token
  // order: a later token of a cycle ring wins).
  out.state = st_in.clone();
  out.state_m = Tensor(DType::f64, st_in.shape());
  const std::int64_t W = 2 * C2;
  for (std::int64_t t = 0; t < T; ++t) {
    const auto b = req[static_cast<std::size_t>(t)];
    const Slot s = state_slot(p, tab + b * p.maxblk, pos[static_cast<std::size_t>(t)], bug);
    if (s.block <= 0) continue;
    float* row = out.state.data<float>() + (s.block * p.bs + s.offset) * W;
    double* m = out.state_m.data<double>() + (s.block * p.bs + s.offset) * W;
    for (std::int64_t o = 0; o < C2; ++o) {
      const std::size_t f = static_cast<std::size_t>(t * C2 + o);
      row[o] = KV[f], row[C2 + o] = S[f];
      ebounds(t, o, m[o], m[C2 + o]);
    }
  }
  // Entries: (request, j) in output-row order.
  std::vector<std::pair<std::int64_t, std::int64_t>> entries;
  for (std::int64_t b = 0; b < p.B; ++b) {
    const std::int64_t s0 = sp.int_at(b), q = cu.int_at(b + 1) - cu.int_at(b);
    for (std::int64_t j = s0 / p.r; j < (s0 + q) / p.r; ++j) entries.emplace_back(b, j);
  }
  out.cmp_kv = Tensor(DType::bf16, {R, D});
  out.cmp_m = Tensor(DType::f64, {R, D});
  out.cmp_def = Tensor(DType::u8, {R, D});
  out.row_req.assign(static_cast<std::size_t>(R), -1);
  out.row_entry.assign(static_cast<std::size_t>(R), -1);
  const std::vector<double> zeros(static_cast<std::size_t>(C2), 0.0);
#pragma omp parallel num_threads(threads)
  {
    std::vector<double> rowbuf(static_cast<std::size_t>(4 * p.coff * p.r * C2)), C(static_cast<std::size_t>(D)),
        eC(C.size()), y(C.size()), ey(C.size());
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t k = 0; k < static_cast<std::int64_t>(entries.size()); ++k) {
      const std::int64_t b = entries[static_cast<std::size_t>(k)].first, j = entries[static_cast<std::size_t>(k)].second;
      const std::int64_t s0 = sp.int_at(b), t0 = cu.int_at(b);
      std::vector<RowRef> rows;
      std::size_t used = 0;
      auto add = [&](std::int64_t ps, bool current) {
        RowRef r;
        r.current = current;
        if (ps < 0) {
          r.missing = true;
        } else if (ps >= s0) {  // this step's token: its values and their bounds, as doubles
          const std::int64_t t = t0 + ps - s0;
          double* kv = rowbuf.data() + used;
          double* s = kv + C2;
          double* ekv = s + C2;
          double* es = ekv + C2;
          used += static_cast<std::size_t>(4 * C2);
          for (std::int64_t o = 0; o < C2; ++o) {
            const std::size_t f = static_cast<std::size_t>(t * C2 + o);
            kv[o] = KV[f], s[o] = S[f];
            ebounds(t, o, ekv[o], es[o]);
          }
          r.kv = kv, r.s = s, r.ekv = ekv, r.es = es;
        } else {  // from the state cache (exact inputs)
          const Slot sl = state_slot(p, tab + b * p.maxblk, ps, bug);
          const float* src = st_in.data<float>() + (std::max<std::int64_t>(sl.block, 0) * p.bs + sl.offset) * W;
          double* kv = rowbuf.data() + used;
          double* s = kv + C2;
          used += static_cast<std::size_t>(2 * C2);
          for (std::int64_t o = 0; o < C2; ++o) kv[o] = src[o], s[o] = src[C2 + o];
          r.kv = kv, r.s = s, r.ekv = zeros.data(), r.es = zeros.data();
        }
        rows.push_back(r);
      };
      if (p.coff == 2)
        for (std::int64_t i = 0; i < p.r; ++i) add(j * p.r - p.r + i, false);
      for (std::int64_t i = 0; i < p.r; ++i) add(j * p.r + i, true);
      pool(p, rows, bug, C.data(), eC.data());
      std::int64_t row = k;  // entries are already in output-row order
      finish(p, C.data(), eC.data(), c.input("norm_weight").data<std::uint16_t>(), c.input("rope_cos").data<float>() + row * p.rope,
             c.input("rope_sin").data<float>() + row * p.rope, y.data(), ey.data());
      for (std::int64_t d = 0; d < D; ++d) {
        out.cmp_kv.data<std::uint16_t>()[row * D + d] = num::f64_to_bf16(y[static_cast<std::size_t>(d)]);
        out.cmp_m.data<double>()[row * D + d] = ey[static_cast<std::size_t>(d)];
        out.cmp_def.data<std::uint8_t>()[row * D + d] = 1;
      }
      out.row_req[static_cast<std::size_t>(row)] = b;
      out.row_entry[static_cast<std::size_t>(row)] = j;
    }
  }
  return out;
}

Expected package(const Params& p, StepResult s) {
  Expected e;
  RefTensor k;
  k.name = "cmp_kv";
  k.kind = CompareKind::bounded;
  k.value = s.cmp_kv;
  k.magnitude = s.cmp_m;
  k.defined = s.cmp_def;
  const std::int64_t D = p.D, r = p.r;
  auto rq = std::make_shared<std::vector<std::int64_t>>(s.row_req), en = std::make_shared<std::vector<std::int64_t>>(s.row_entry);
  k.describe = [D, r, rq, en](std::int64_t f) {
    const auto row = static_cast<std::size_t>(f / D);
    if (row >= rq->size() || (*rq)[row] < 0) return "row " + std::to_string(row) + " (padding) dim " + std::to_string(f % D);
    return "row " + std::to_string(row) + " (request " + std::to_string((*rq)[row]) + " entry " + std::to_string((*en)[row]) +
           ", tokens " + std::to_string((*en)[row] * r) + ".." + std::to_string((*en)[row] * r + r - 1) + ") dim " + std::to_string(f % D);
  };
  RefTensor st;
  st.name = "state_cache";
  st.kind = CompareKind::bounded;
  st.value = s.state;
  st.magnitude = s.state_m;
  const std::int64_t bs = p.bs, C2 = p.C2;
  st.describe = [bs, C2](std::int64_t f) {
    const std::int64_t row = f / (2 * C2), col = f % (2 * C2);
    return "block " + std::to_string(row / bs) + " offset " + std::to_string(row % bs) + (col < C2 ? " kv " : " score ") +
           std::to_string(col % C2);
  };
  e.tensors = {std::move(k), std::move(st)};
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return package(p, run_step(c, p, Bug::none, opt.thread_count())); }

}  // namespace dsa::v4::compressor
