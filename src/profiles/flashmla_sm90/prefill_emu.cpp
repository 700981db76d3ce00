// The flashmla-sm90 prefill emulation (prefill_emu.hpp): reference/flashmla_sm90.py's operations in C++, one query
// row at a time. fp32 steps are IEEE single operations with the kernel's flush of subnormals (.ftz); the WGMMA model
// runs exactly in integers (sm90_ops.hpp: bf16 significands, truncations to powers of two).
#include "profiles/flashmla_sm90/prefill_emu.hpp"
#include "profiles/flashmla_sm90/sm90_ops.hpp"

#include "numerics/formats.hpp"

#include <zlib.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>

// The measured tables (sm90_mufu.bin, built in: DSA_MUFU_BLOB is its path, set by CMakeLists.txt).
extern "C" const unsigned char dsa_fm_mufu_blob[];
extern "C" const unsigned char dsa_fm_mufu_blob_end[];
__asm__(".section .rodata\n.balign 16\n.globl dsa_fm_mufu_blob\ndsa_fm_mufu_blob:\n.incbin \"" DSA_MUFU_BLOB
        "\"\n.globl dsa_fm_mufu_blob_end\ndsa_fm_mufu_blob_end:\n.byte 0\n.previous\n");

namespace dsa::profiles::flashmla_emu {

namespace {

struct Tables {
  std::vector<std::int32_t> ex2, rcp, lg2_frac, lg2_1_2;
};

// "DSAMUFU1", u32 count, per table: name[24], u32 width, u64 n, i32 first, u64 zlen, zlib(n - 1 differences).
const Tables& tables() {
  static Tables t;
  static std::once_flag once;
  std::call_once(once, [] {
    const unsigned char* p = dsa_fm_mufu_blob;
    const std::size_t size = static_cast<std::size_t>(dsa_fm_mufu_blob_end - dsa_fm_mufu_blob);
    auto need = [&](std::size_t off, std::size_t n) {
      if (off + n > size) throw std::runtime_error("flashmla-sm90: the embedded MUFU tables are truncated");
    };
    need(0, 12);
    if (std::memcmp(p, "DSAMUFU1", 8) != 0) throw std::runtime_error("flashmla-sm90: the embedded MUFU tables have no DSAMUFU1 header");
    std::uint32_t count;
    std::memcpy(&count, p + 8, 4);
    std::size_t off = 12;
    for (std::uint32_t k = 0; k < count; ++k) {
      need(off, 48);
      char name[25] = {};
      std::memcpy(name, p + off, 24);
      std::uint32_t width;
      std::uint64_t n, zlen;
      std::int32_t first;
      std::memcpy(&width, p + off + 24, 4);
      std::memcpy(&n, p + off + 28, 8);
      std::memcpy(&first, p + off + 36, 4);
      std::memcpy(&zlen, p + off + 40, 8);
      off += 48;
      need(off, zlen);
      if ((width != 8 && width != 32) || n == 0 || n > (std::uint64_t{1} << 24) + 1)
        throw std::runtime_error(std::string("flashmla-sm90: MUFU table ") + name + ": bad header");
      std::vector<unsigned char> raw((n - 1) * (width / 8));
      uLongf got = static_cast<uLongf>(raw.size());
      if (::uncompress(raw.data(), &got, p + off, static_cast<uLong>(zlen)) != Z_OK || got != raw.size())
        throw std::runtime_error(std::string("flashmla-sm90: MUFU table ") + name + " does not inflate");
      off += zlen;
      std::vector<std::int32_t> v(n);
      std::int64_t x = first;
      v[0] = first;
      for (std::uint64_t i = 1; i < n; ++i) {
        if (width == 8) x += static_cast<std::int8_t>(raw[i - 1]);
        else {
          std::int32_t d;
          std::memcpy(&d, raw.data() + 4 * (i - 1), 4);
          x += d;
        }
        v[i] = static_cast<std::int32_t>(x);
      }
      const std::string nm(name);
      if (nm == "sm90_ex2_approx") t.ex2 = std::move(v);
      else if (nm == "sm90_rcp_approx") t.rcp = std::move(v);
      else if (nm == "sm90_lg2_approx_frac") t.lg2_frac = std::move(v);
      else if (nm == "sm90_lg2_approx_1_2") t.lg2_1_2 = std::move(v);
    }
    if (t.ex2.size() != (1u << 23) + 1 || t.rcp.size() != (1u << 23) || t.lg2_frac.size() != (1u << 23) || t.lg2_1_2.size() != (1u << 23))
      throw std::runtime_error("flashmla-sm90: the embedded MUFU tables are incomplete");
  });
  return t;
}

float f32(std::int32_t bits) { return num::f32_from_bits(static_cast<std::uint32_t>(bits)); }
using ops::ftz;
using ops::mul;
using ops::add;
using ops::bf16;
using ops::bf16f;
using ops::Op;
float fmaf_(float a, float b, float c) { return ops::fma(a, b, c); }
}  // namespace

// Integer arithmetic only: the AVX2 clone (variable shifts per lane) gives the same bits as the baseline one. (A
// file-local function: clang takes target_clones only on a function not declared or used before without it.)
__attribute__((target_clones("avx2", "default"))) static double k16_integer(double acc, const Op* a, const Op* b) {
  // The accumulator (an fp32 value held in a double): its exponent and 24-bit signed significand from the bits.
  std::uint64_t ab;
  std::memcpy(&ab, &acc, 8);
  const bool has_acc = (ab << 1) != 0;
  const int eacc = static_cast<int>((ab >> 52) & 0x7FF) - 1023;
  // Products: |sig_a sig_b| < 2^16; their exponents; the alignment exponent e (branch-free, vectorizable).
  std::int32_t m[16], pe[16];
  int e = has_acc ? eacc : INT_MIN;
  for (int j = 0; j < 16; ++j) {
    m[j] = a[j].sig * b[j].sig;
    pe[j] = m[j] != 0 ? a[j].exp + b[j].exp : INT_MIN;
    e = std::max(e, pe[j]);
  }
  if (e == INT_MIN) return acc;
  // Terms at 2^(e - 25): |m| 2^11 >> (e - ea - eb), the magnitude truncated (16 terms < 2^27 each: the sum fits in
  // int32), then the accumulator's |m24| 2^2 >> (e - eacc).
  std::int32_t sum = 0;
  for (int j = 0; j < 16; ++j) {
    const std::int32_t sg = m[j] >> 31, mag = ((m[j] ^ sg) - sg) << 11;
    const int r = m[j] != 0 ? std::min(e - pe[j], 31) : 31;
    const std::int32_t v = mag >> r;
    sum += (v ^ sg) - sg;
  }
  std::int64_t t = sum;
  if (has_acc) {
    const std::int64_t m24 = static_cast<std::int64_t>(((ab & 0xFFFFFFFFFFFFFull) | (std::uint64_t{1} << 52)) >> 29);
    const std::int64_t mag = (m24 << 2) >> std::min(e - eacc, 62);
    t += (ab >> 63) ? -mag : mag;
  }
  if (t == 0) return 0.0;
  const std::uint64_t mag = static_cast<std::uint64_t>(t < 0 ? -t : t);
  const int len = 64 - __builtin_clzll(mag), drop = std::max(len - 24, 0);
  const double kept = static_cast<double>(mag >> drop);
  const int ex = e - 25 + drop;  // |result| = kept 2^ex; kept < 2^24, ex within the normal double range here
  const std::uint64_t pb = static_cast<std::uint64_t>(ex + 1023) << 52;
  double p2;
  std::memcpy(&p2, &pb, 8);
  return t < 0 ? -(kept * p2) : kept * p2;
}

double ops::wgmma_k16(double acc, const Op* a, const Op* b) { return k16_integer(acc, a, b); }

namespace {

inline double chunk(double acc, const Op* a, const Op* b) { return ops::wgmma_k16(acc, a, b); }

}  // namespace


float ex2_approx(float x) {  // exact for x <= 0; x > 0 by the same rule (close, see the header)
  const Tables& t = tables();
  x = ftz(x);
  if (std::isnan(x)) return x;
  if (x == -std::numeric_limits<float>::infinity() || x < -200.0f) return 0.0f;
  if (x >= 128.0f) return std::numeric_limits<float>::infinity();
  const double xd = x, c = std::ceil(xd);
  const auto k = static_cast<std::int64_t>(std::trunc((c - xd) * 8388608.0));
  return ftz(static_cast<float>(std::ldexp(static_cast<double>(f32(t.ex2[static_cast<std::size_t>(k)])), static_cast<int>(c))));
}

float rcp_approx(float x) {
  const Tables& t = tables();
  x = ftz(x);
  if (std::isinf(x) && x > 0) return 0.0f;
  if (!(x > 0)) return 1.0f / x;  // not a kernel argument (unmeasured)
  const std::uint32_t b = num::f32_bits(x);
  const int e = static_cast<int>(b >> 23) - 127;
  return ftz(static_cast<float>(std::ldexp(static_cast<double>(f32(t.rcp[b & 0x7FFFFFu])), -e)));
}

float lg2_approx(float x) {
  const Tables& t = tables();
  if (!(x >= 1.0f) || std::isinf(x)) return static_cast<float>(std::log2(static_cast<double>(x)));  // unmeasured
  const std::uint32_t b = num::f32_bits(x);
  const int e = static_cast<int>(b >> 23) - 127;
  const std::uint32_t i = b & 0x7FFFFFu;
  if (e == 0) return f32(t.lg2_1_2[i]);
  const double v = e + static_cast<double>(t.lg2_frac[i]) * 0x1p-23;
  const double q = std::ldexp(1.0, std::ilogb(v) - 23);
  return static_cast<float>(std::trunc(v / q) * q);
}

void lg2_unmeasured_bounds(float x, float& lo, float& hi) {
  const double l = std::log2(static_cast<double>(x)), a = l - 0x1p-22, b = l + 0x1p-22;
  lo = static_cast<float>(a), hi = static_cast<float>(b);
  if (static_cast<double>(lo) > a) lo = std::nextafter(lo, -std::numeric_limits<float>::infinity());
  if (static_cast<double>(hi) < b) hi = std::nextafter(hi, std::numeric_limits<float>::infinity());
}

bool prefill_row(const PrefillRow& r, std::uint16_t* out, float* max_logits, float* lse, std::string& why) {
  const std::int64_t H = r.h_q, D = r.d_qk;
  if (D != 512 && D != 576) return why = "d_qk " + std::to_string(D) + " (the sm90 kernel: 512 or 576)", false;
  if (H % 64 != 0) return why = "h_q " + std::to_string(H) + " not a multiple of 64", false;
  if (r.length < 0 && r.topk % 64 != 0) return why = "topk " + std::to_string(r.topk) + " not a multiple of 64", false;
  const std::int64_t nb = r.length < 0 ? r.topk / 64 : (r.length + 63) / 64;
  const std::int64_t nk = 64 * (nb + nb % 2);
  std::vector<char> valid(static_cast<std::size_t>(nk), 0);
  bool any = false;
  for (std::int64_t j = 0; j < nk; ++j) {
    if (j >= r.topk || (r.length >= 0 && j >= r.length) || j >= 64 * nb) continue;
    const std::int64_t t = r.idx[j];
    valid[static_cast<std::size_t>(j)] = t >= 0 && t < r.s_kv;
    any = any || valid[static_cast<std::size_t>(j)];
  }
  // Operands as significands and exponents (ops::Op); non-finite values are outside the model.
  std::vector<Op> qo(static_cast<std::size_t>(H * D));
  for (std::int64_t i = 0; i < H * D; ++i) {
    const double v = bf16f(r.q[i]);
    if (!std::isfinite(v)) return why = "a non-finite q value", false;
    qo[i] = ops::op(v);
  }
  const float scale = static_cast<float>(r.sm_scale) * 1.44269504f;
  const float L2E = 1.4426950408889634f, LN2 = 0.6931471805599453f, NEG = -std::numeric_limits<float>::infinity();
  std::vector<Op> P(64 * 64);  // one block's P (bf16 values)
  for (std::int64_t h0 = 0; h0 < H; h0 += 64) {
    const Op* q = qo.data() + h0 * D;
    std::vector<float> rM0(64, -1e30f), rM1(64, -1e30f), rL0(64 * 4, 0.0f), rL1(64 * 4, 0.0f);
    std::vector<double> O0(64 * 256, 0.0), O1(64 * 256, 0.0);  // fp32 values
    std::vector<float> s0(64 * 64), s1(64 * 64), p0(64 * 64), p1(64 * 64), new0(64), new1(64);
    std::vector<Op> K0(64 * D), K1(64 * D), V0(512 * 64), V1(512 * 64);  // V*: the block's values [dim][key]
    // Block b's keys (zero rows where masked) and scores [h][t].
    auto block = [&](std::int64_t b, bool wg1, std::vector<Op>& Ko, std::vector<Op>& Vt, std::vector<float>& s) -> bool {
      for (std::int64_t t = 0; t < 64; ++t) {
        const std::int64_t j = 64 * b + t;
        const bool ok = valid[static_cast<std::size_t>(j)] != 0;
        for (std::int64_t d = 0; d < D; ++d) {
          const double v = ok ? static_cast<double>(bf16f(r.kv[r.idx[j] * D + d])) : 0.0;
          if (!std::isfinite(v)) return false;
          Ko[t * D + d] = ops::op(v);
          if (d < 512) Vt[d * 64 + t] = Ko[t * D + d];
        }
      }
      const std::int64_t nt = D / 64;
      for (std::int64_t h = 0; h < 64; ++h)
        for (std::int64_t t = 0; t < 64; ++t) {
          if (!valid[static_cast<std::size_t>(64 * b + t)]) {
            s[h * 64 + t] = NEG;
            continue;
          }
          double acc = 0;
          for (std::int64_t ti = 0; ti < nt; ++ti) {
            const std::int64_t tile = wg1 ? (ti + 4) % nt : ti;  // warpgroup 1: tiles 4..nt-1 then 0..3
            for (std::int64_t c = 0; c < 4; ++c) {
              const std::int64_t d0 = tile * 64 + 16 * c;
              acc = chunk(acc, q + h * D + d0, Ko.data() + t * D + d0);
            }
          }
          s[h * 64 + t] = static_cast<float>(acc);
        }
      return true;
    };
    auto softmax = [&](const std::vector<float>& s, const std::vector<float>& old, std::vector<float>& rM, std::vector<float>& rL,
                       std::vector<float>& nw, std::vector<float>& f, std::vector<float>& p) {
      for (std::int64_t h = 0; h < 64; ++h) {
        float mx = NEG;
        for (std::int64_t t = 0; t < 64; ++t) mx = std::max(mx, s[h * 64 + t]);
        nw[h] = std::max(old[h], mul(mx, scale));
        f[h] = ex2_approx(add(rM[h], -nw[h]));
        for (std::int64_t t = 0; t < 64; ++t) p[h * 64 + t] = ex2_approx(fmaf_(s[h * 64 + t], scale, -nw[h]));
        for (int c = 0; c < 4; ++c) {
          float sum = 0.0f;
          for (int m = 0; m < 8; ++m) sum = add(sum, add(p[h * 64 + 8 * m + 2 * c], p[h * 64 + 8 * m + 2 * c + 1]));
          rL[h * 4 + c] = fmaf_(rL[h * 4 + c], f[h], sum);
        }
      }
    };
    // O[h][d0 .. d0+256) += P V by the WGMMA model, 16 keys per k-step (P bf16 values).
    auto pv = [&](std::vector<double>& O, const std::vector<float>& Pb, const std::vector<Op>& Vt, std::int64_t d0) {
      for (std::int64_t i = 0; i < 64 * 64; ++i) P[i] = ops::op(Pb[i]);
      for (std::int64_t h = 0; h < 64; ++h)
        for (std::int64_t d = 0; d < 256; ++d) {
          double acc = O[h * 256 + d];
          for (std::int64_t c = 0; c < 4; ++c)
            acc = chunk(acc, P.data() + h * 64 + 16 * c, Vt.data() + (d0 + d) * 64 + 16 * c);
          O[h * 256 + d] = acc;
        }
    };
    auto scale_o = [](std::vector<double>& O, const std::vector<float>& f) {
      for (std::int64_t h = 0; h < 64; ++h)
        for (std::int64_t d = 0; d < 256; ++d) O[h * 256 + d] = mul(static_cast<float>(O[h * 256 + d]), f[h]);
    };
    std::vector<float> f0(64), f1(64), g(64), Pb(64 * 64);
    for (std::int64_t j = 0; j < nb + nb % 2; j += 2) {
      if (!block(j, false, K0, V0, s0) || !block(j + 1, true, K1, V1, s1)) return why = "a non-finite kv value", false;
      softmax(s0, rM0, rM0, rL0, new0, f0, p0);
      scale_o(O0, f0);
      for (std::int64_t i = 0; i < 64 * 64; ++i) Pb[i] = bf16f(bf16(p0[i]));
      pv(O0, Pb, V0, 0);
      softmax(s1, new0, rM1, rL1, new1, f1, p1);
      rM1 = new1;
      scale_o(O1, f1);
      std::vector<float> P1(64 * 64);
      for (std::int64_t i = 0; i < 64 * 64; ++i) P1[i] = bf16f(bf16(p1[i]));
      pv(O1, P1, V1, 256);
      for (std::int64_t h = 0; h < 64; ++h) g[h] = ex2_approx(add(new0[h], -new1[h]));
      rM0 = new1;
      for (std::int64_t h = 0; h < 64; ++h)
        for (std::int64_t t = 0; t < 64; ++t) Pb[h * 64 + t] = bf16f(bf16(mul(p0[h * 64 + t], g[h])));
      pv(O1, Pb, V0, 256);
      scale_o(O0, g);
      for (std::int64_t h = 0; h < 64; ++h)
        for (int c = 0; c < 4; ++c) rL0[h * 4 + c] = mul(rL0[h * 4 + c], g[h]);
      pv(O0, P1, V1, 0);
    }
    for (std::int64_t h = 0; h < 64; ++h) {
      auto quad = [&](const std::vector<float>& L) { return add(add(L[h * 4], L[h * 4 + 1]), add(L[h * 4 + 2], L[h * 4 + 3])); };
      const float L = add(quad(rL0), quad(rL1));
      const float sl = r.sink ? mul(r.sink[h0 + h], L2E) : NEG;
      // A sink above the row max gives ex2 a positive argument, where the measured rule is close, not exact (ulp
      // differences on part of the inputs); its effect on out passes through L + ex2, rcp and the bf16 rounding:
      // the real sink captures (35 such heads) reproduce every bit.
      const float arg = add(sl, -rM0[h]);
      const float inv = L == 0.0f ? 0.0f : rcp_approx(add(L, ex2_approx(arg)));
      for (std::int64_t d = 0; d < 512; ++d) {
        const double o = d < 256 ? O0[h * 256 + d] : O1[h * 256 + d - 256];
        out[(h0 + h) * 512 + d] = bf16(mul(static_cast<float>(o), inv));
      }
      max_logits[h0 + h] = any ? mul(rM0[h], LN2) : NEG;
      if (!any) {
        lse[h0 + h] = std::numeric_limits<float>::infinity();
      } else if (L >= 1.0f) {
        lse[h0 + h] = fmaf_(lg2_approx(L), LN2, mul(rM0[h], LN2));
      } else {  // one dominant key: L in (0, 1)
        float lo, hi;
        lg2_unmeasured_bounds(L, lo, hi);
        const float a = fmaf_(lo, LN2, mul(rM0[h], LN2)), b = fmaf_(hi, LN2, mul(rM0[h], LN2));
        if (num::f32_bits(a) != num::f32_bits(b))
          return why = "head " + std::to_string(h0 + h) + ": a row sum in (0, 1) whose lse depends on lg2.approx below 1 (not measured)", false;
        lse[h0 + h] = a;
      }
    }
  }
  return true;
}

}  // namespace dsa::profiles::flashmla_emu
