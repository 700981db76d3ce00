// v4.indexer_prolog CPU reference: rows in parallel (each row independent; exact: any thread count, same bytes).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "numerics/formats.hpp"
#include "stages/indexer/common/hadamard.hpp"
#include "stages/v4/indexer_prolog/core.hpp"

namespace dsa::v4::indexer_prolog {

using i64 = std::int64_t;

float dynamic_quant_int8(const std::uint16_t* x, i64 n, AmaxZero az, std::int8_t* codes, Bug bug) {
  float amax = 0;
  bool nan = false;
  for (i64 i = 0; i < n; ++i) {
    const float a = std::fabs(num::bf16_to_f32(x[i]));
    nan |= a != a;
    amax = a > amax ? a : amax;
  }
  if (nan) {
    std::fill(codes, codes + n, std::int8_t{0});
    return std::numeric_limits<float>::quiet_NaN();
  }
  if (amax == 0) {
    std::fill(codes, codes + n, std::int8_t{0});
    return az == AmaxZero::scale1 ? 1.0f : 0.0f;
  }
  const float scale = bug == Bug::scale_div127 ? amax / 127.0f : amax * (1.0f / 127.0f);
  const float inv = 127.0f / amax;
  for (i64 i = 0; i < n; ++i) {
    const float y = num::bf16_to_f32(x[i]) * inv;
    const float r = bug == Bug::codes_trunc ? std::trunc(y) : std::nearbyint(y);  // default FE_TONEAREST: half to even
    codes[i] = std::isnan(r) ? std::int8_t{0} : static_cast<std::int8_t>(std::clamp(r, -127.0f, 127.0f));  // inf * 0 = NaN -> 0
  }
  return scale;
}

namespace {

double bf16v(double x) { return static_cast<double>(num::bf16_to_f32(num::f64_to_bf16(x))); }
double gamma_n(i64 n, double u) { return n <= 0 ? 0.0 : static_cast<double>(n) * u / (1.0 - static_cast<double>(n) * u); }

}  // namespace

void rotate_row(const std::uint16_t* x, i64 D, const float* cos_v, const float* sin_v, HadamardKind kind, std::uint16_t* out,
                double* bound, Bug bug) {
  const i64 R = 64, base = D - R;
  const double u32 = std::ldexp(1.0, -24), u64 = std::ldexp(1.0, -53);
  // r: the reference's bf16 RoPE output; [lo, hi]: the bf16 values a kernel with the fp32 error may produce.
  std::vector<double> r(static_cast<std::size_t>(D)), lo(r.size()), hi(r.size());
  for (i64 d = 0; d < base; ++d) r[static_cast<std::size_t>(d)] = lo[static_cast<std::size_t>(d)] = hi[static_cast<std::size_t>(d)] = num::bf16_to_f32(x[d]);
  for (i64 i = 0; i < R / 2; ++i) {
    const i64 a = bug == Bug::rope_neox ? base + i : base + 2 * i, b = bug == Bug::rope_neox ? base + i + R / 2 : base + 2 * i + 1;
    const double xa = num::bf16_to_f32(x[a]), xb = num::bf16_to_f32(x[b]), c = cos_v[i], sn = sin_v[i];
    const double ac = xa * c, bs = xb * sn, bc = xb * c, as = xa * sn;  // exact: 8 x 24 significant bits
    const double rho[2] = {ac - bs, bc + as}, mag[2] = {std::fabs(ac) + std::fabs(bs), std::fabs(bc) + std::fabs(as)};
    const i64 at[2] = {a, b};
    for (int k = 0; k < 2; ++k) {
      const std::size_t q = static_cast<std::size_t>(at[k]);
      const double e = (3 * u32 + 2 * u64) * mag[k];
      r[q] = bf16v(rho[k]);
      lo[q] = std::isfinite(rho[k]) ? bf16v(rho[k] - e) : r[q];
      hi[q] = std::isfinite(rho[k]) ? bf16v(rho[k] + e) : r[q];
    }
  }
  const float s32 = dsa::indexer::hadamard_scale_f32(D);
  auto final_round = [&](double h) {  // bf16(fl32(h * s32)), h an fp32 value
    const float f = bug == Bug::no_hadamard_scale ? static_cast<float>(h) : static_cast<float>(h) * s32;
    return static_cast<double>(num::bf16_to_f32(num::f32_to_bf16(f)));
  };
  double W = 0, A = 0;  // total input uncertainty, sum |r|
  int lsb = 1 << 20;     // the lowest significant bit of any possible input: every partial sum is a multiple of 2^lsb
  for (i64 d = 0; d < D; ++d) {
    const std::size_t q = static_cast<std::size_t>(d);
    W += hi[q] - lo[q];
    A += std::max(std::fabs(lo[q]), std::fabs(hi[q]));
    for (double v : {lo[q], hi[q]})
      if (v != 0 && std::isfinite(v)) {
        int e;
        std::frexp(v, &e);
        lsb = std::min(lsb, e - 8);  // bf16: 8 significant bits
      }
  }
  // fp32 sums of these values are exact in any order when every partial sum fits 24 bits above 2^lsb.
  const bool sums_exact = A < std::ldexp(1.0, std::min(lsb + 24, 1000));
  std::vector<float> f(static_cast<std::size_t>(D));
  if (kind == HadamardKind::fwht) {
    for (i64 d = 0; d < D; ++d) f[static_cast<std::size_t>(d)] = static_cast<float>(r[static_cast<std::size_t>(d)]);
    dsa::indexer::fwht_f32(f.data(), D);
  }
  for (i64 i = 0; i < D; ++i) {
    double h, hlo, hhi;
    if (kind == HadamardKind::fwht) {  // the same fp32 butterflies: exact unless an input is uncertain
      h = f[static_cast<std::size_t>(i)];
      const double E = W > 0 ? W + (sums_exact ? 0.0 : 2 * gamma_n(7, u32) * (A + W)) : 0.0;
      hlo = h - E, hhi = h + E;
    } else {  // bf16(cube fp32 sum): the exact sum, its interval, the accumulation error
      double S = 0, Slo = 0, Shi = 0;
      for (i64 d = 0; d < D; ++d) {
        const std::size_t q = static_cast<std::size_t>(d);
        const bool neg = __builtin_popcountll(static_cast<unsigned long long>(i & d)) & 1;
        S += neg ? -r[q] : r[q];
        Slo += neg ? -hi[q] : lo[q];
        Shi += neg ? -lo[q] : hi[q];
      }
      const double E = sums_exact ? 0.0 : (gamma_n(D - 1, u32) + gamma_n(D - 1, u64)) * A;
      h = bf16v(S);
      hlo = std::isfinite(S) ? bf16v(Slo - E) : h;
      hhi = std::isfinite(S) ? bf16v(Shi + E) : h;
    }
    const double o = final_round(h);
    double olo = o, ohi = o;
    if (std::isfinite(h) && (hlo != h || hhi != h)) {  // fp32 ends, widened by an ulp against the f64 -> f32 rounding
      olo = final_round(std::nextafter(static_cast<float>(hlo), -INFINITY));
      ohi = final_round(std::nextafter(static_cast<float>(hhi), INFINITY));
    }
    out[i] = num::f64_to_bf16(o);
    bound[i] = std::isfinite(o) ? std::max(o - olo, ohi - o) : 0.0;
  }
}

std::uint16_t a3_weight(std::uint16_t w_bf16, Bug bug) {
  const float w = num::bf16_to_f32(w_bf16);
  if (bug == Bug::weights_unscaled) return num::f32_to_fp16(w);
  return num::f32_to_fp16(num::round_to_bf16(w * static_cast<float>(0.011048543456039806)));
}

i64 slot_of(const Case& c, const Params& p, i64 r) {
  const Tensor& sm = c.input("slot_mapping");
  if (!p.pairs) return sm.int_at(r) < 0 ? -1 : sm.int_at(r);
  const i64 blk = sm.int_at(2 * r), off = sm.int_at(2 * r + 1);
  return blk < 0 ? -1 : blk * p.bs + off;
}

Expected run(const Case& c, const Params& p, Bug bug, int threads) {
  Expected e;
  const int nt = std::max(1, threads);
  auto fp16_nan = [](float s) { return std::isnan(s) ? std::uint16_t{0x7FFF} : num::f32_to_fp16(s); };  // CUDA-canonical
  const Tensor* q = c.input_opt("q");
  Tensor rot;  // the quant's input when the path starts at q_pre: the dumped q_rot, else the reference's
  if (const Tensor* pre = c.input_opt("q_pre")) {
    const i64 T = pre->dim(0), H = pre->dim(1), D = pre->dim(2);
    const Tensor& cs = c.input("rope_cos");
    const Tensor& sn = c.input("rope_sin");
    const i64 Wc = cs.dim(-1), step = Wc == 64 ? 2 : 1;  // interleave-duplicated [T, 64] or [T, 32]
    Tensor ref(DType::bf16, {T, H, D}, Tensor::Uninit{}), bnd(DType::f64, {T, H, D}, Tensor::Uninit{});
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < T * H; ++r) {
      const i64 t = r / H;
      float cv[32], sv[32];
      for (i64 i = 0; i < 32; ++i) {
        cv[i] = cs.data<float>()[t * Wc + i * step];
        sv[i] = sn.data<float>()[t * Wc + i * step];
      }
      rotate_row(pre->data<std::uint16_t>() + r * D, D, cv, sv, p.hadamard, ref.data<std::uint16_t>() + r * D, bnd.data<double>() + r * D, bug);
    }
    RefTensor a;
    a.name = "q_rot";
    a.kind = CompareKind::bounded;
    a.value = ref;
    a.magnitude = bnd;
    a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
    e.tensors.push_back(std::move(a));
    auto it = c.outputs.find("q_rot");
    rot = it != c.outputs.end() && it->second.dtype() == DType::bf16 && it->second.numel() == ref.numel() ? it->second : ref;
    q = &rot;
  }
  if (q) {
    const i64 T = q->dim(0), H = q->dim(1), D = q->dim(2);
    Tensor q8(DType::int8, {T, H, D}, Tensor::Uninit{}), qs(DType::fp16, {T, H}, Tensor::Uninit{});
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < T * H; ++r)
      qs.data<std::uint16_t>()[r] = fp16_nan(dynamic_quant_int8(q->data<std::uint16_t>() + r * D, D, p.amax_zero, q8.data<std::int8_t>() + r * D, bug));
    RefTensor a;
    a.name = "q_int8";
    a.value = q8;
    a.describe = [H, D](i64 f) { return "token " + std::to_string(f / (H * D)) + " head " + std::to_string(f / D % H) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "q_scale";
    b.value = qs;
    b.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  if (const Tensor* w = c.input_opt("weights")) {
    const i64 H = w->dim(-1);
    Tensor w16(DType::fp16, w->shape(), Tensor::Uninit{});
    for (i64 i = 0; i < w->numel(); ++i) w16.data<std::uint16_t>()[i] = a3_weight(w->data<std::uint16_t>()[i], bug);
    RefTensor a;
    a.name = "weights_fp16";
    a.value = w16;
    a.describe = [H](i64 f) { return "token " + std::to_string(f / H) + " head " + std::to_string(f % H); };
    e.tensors.push_back(std::move(a));
  }
  if (const Tensor* k = c.input_opt("k")) {
    const i64 R = k->dim(0), D = p.D, bs = p.bs;
    Tensor kc = c.input("k_cache_in").clone(), ksc = c.input("k_scale_cache_in").clone();
    std::vector<std::int8_t> codes(static_cast<std::size_t>(R * D));
    std::vector<std::uint16_t> sc(static_cast<std::size_t>(R));
#pragma omp parallel for schedule(static) num_threads(nt)
    for (i64 r = 0; r < R; ++r)
      sc[static_cast<std::size_t>(r)] = fp16_nan(dynamic_quant_int8(k->data<std::uint16_t>() + r * D, D, p.amax_zero, codes.data() + r * D, bug));
    for (i64 r = 0; r < R; ++r) {  // distinct slots (parse): order-free
      const i64 s = slot_of(c, p, r);
      if (s < 0) continue;
      std::copy(codes.begin() + r * D, codes.begin() + (r + 1) * D, kc.data<std::int8_t>() + s * D);
      ksc.data<std::uint16_t>()[s] = sc[static_cast<std::size_t>(r)];
    }
    RefTensor a;
    a.name = "k_cache";
    a.value = kc;
    a.describe = [bs, D](i64 f) { return "block " + std::to_string(f / (bs * D)) + " slot " + std::to_string(f / D % bs) + " dim " + std::to_string(f % D); };
    RefTensor b;
    b.name = "k_scale_cache";
    b.value = ksc;
    b.describe = [bs](i64 f) { return "block " + std::to_string(f / bs) + " slot " + std::to_string(f % bs) + " scale"; };
    e.tensors.push_back(std::move(a));
    e.tensors.push_back(std::move(b));
  }
  return e;
}

Expected cpu(const Case& c, const Params& p, const RefOptions& opt) { return run(c, p, Bug::none, opt.thread_count()); }

}  // namespace dsa::v4::indexer_prolog
