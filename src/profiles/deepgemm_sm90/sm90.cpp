// deepgemm-sm90 emulation: see sm90.hpp and ../shared/specs/sm90_fp8_wgmma.md. Integer implementation of the
// WGMMA chunk model: every term is an integer multiple of 2^(e-13) below 2^16 and a chunk sums at most 33 of
// them, so int64 is exact throughout.
#include "profiles/deepgemm_sm90/sm90.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace dsa::profiles::sm90 {
namespace {
constexpr int kZeroExp = -100;  // exponent given to zero operands: a product with a zero factor never sets e
}

Fp8Op decode_e4m3(std::uint8_t code) {
  Fp8Op o;
  const int mant = code & 7, ef = (code >> 3) & 15;
  const bool neg = (code & 0x80) != 0;
  if ((code & 0x7F) == 0x7F) {
    o.nan = true;
    return o;
  }
  int sig;
  if (ef == 0) {
    sig = mant;  // value = mant * 2^-9 = mant * 2^(-6 - 3)
    o.exp = static_cast<std::int8_t>(mant == 0 ? kZeroExp : -6);
  } else {
    sig = 8 + mant;  // value = (8 + mant) * 2^(ef - 7 - 3)
    o.exp = static_cast<std::int8_t>(ef - 7);
  }
  o.sig = static_cast<std::int8_t>(neg ? -sig : sig);
  return o;
}

const Fp8Op* fp8_table() {
  static const std::array<Fp8Op, 256> t = [] {
    std::array<Fp8Op, 256> a{};
    for (int c = 0; c < 256; ++c) a[static_cast<std::size_t>(c)] = decode_e4m3(static_cast<std::uint8_t>(c));
    return a;
  }();
  return t.data();
}

namespace {
inline int floor_log2(std::uint64_t x) { return 63 - __builtin_clzll(x); }
// sign(v) * trunc(|v| / 2^sh) for sh >= 0 (truncation toward zero), v * 2^-sh for sh < 0.
inline std::int64_t shift_trunc(std::int64_t v, int sh) {
  if (sh <= 0) return v * (std::int64_t{1} << (-sh));
  if (sh > 62) return 0;
  const std::int64_t m = (v < 0 ? -v : v) >> sh;
  return v < 0 ? -m : m;
}
}  // namespace

// The chunk model on SoA int32 operands. Every non-zero product P * 2^(pe-6) (|P| <= 225, pe <= e) is truncated
// to a multiple of 2^(e-13): trunc(|P| * 2^(pe - e + 7)) = (|P| << 7) >> (e - pe) (e - pe >= 0; < 2^15, so int32
// lanes suffice: a chunk sums at most 32 * 28800 + 2^14 < 2^20). target_clones: an AVX2 version (variable
// lane shifts) chosen at load time, and the portable default; both compute the same integers.
__attribute__((target_clones("avx2", "default")))
float wgmma_dot_vec(const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs, const std::int32_t* be,
                    int n, bool any_nan) {
  if (any_nan) return std::numeric_limits<float>::quiet_NaN();
  std::int64_t T = 0;  // acc = T * 2^u
  int u = 0;
  for (int c0 = 0; c0 < n; c0 += 32) {
    std::int32_t e = 2 * kZeroExp;
    for (int i = c0; i < c0 + 32; ++i) e = std::max(e, ae[i] + be[i]);
    if (T != 0) e = std::max<std::int32_t>(e, floor_log2(static_cast<std::uint64_t>(T < 0 ? -T : T)) + u);
    if (e < -12) continue;  // real products have pe >= -12; zero factors give <= kZeroExp + 8: acc stays 0
    const int unit = e - 13;
    std::int32_t psum = 0;
    for (int i = c0; i < c0 + 32; ++i) {
      const std::int32_t P = as[i] * bs[i];
      const std::int32_t sh = std::min(e - (ae[i] + be[i]), 31);
      const std::int32_t m = ((P < 0 ? -P : P) << 7) >> sh;
      psum += P < 0 ? -m : m;
    }
    const std::int64_t sum = psum + (T != 0 ? shift_trunc(T, unit - u) : 0);
    if (sum == 0) {
      T = 0;
      u = 0;
      continue;
    }
    std::uint64_t mag = static_cast<std::uint64_t>(sum < 0 ? -sum : sum);
    const int nb = floor_log2(mag);
    if (nb > 13) mag = (mag >> (nb - 13)) << (nb - 13);
    T = sum < 0 ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
    u = unit;
  }
  // |T| has <= 14 significant bits and 2^u >= 2^-25: exact in fp32.
  return std::ldexp(static_cast<float>(T), u);
}

bool decode_vec(const std::uint8_t* codes, int n, std::int32_t* sig, std::int32_t* exp) {
  const Fp8Op* t = fp8_table();
  bool nan = false;
  for (int i = 0; i < n; ++i) {
    const Fp8Op& o = t[codes[i]];
    sig[i] = o.sig;
    exp[i] = o.exp;
    nan |= o.nan;
  }
  return nan;
}

float wgmma_dot(const Fp8Op* a, const Fp8Op* b, int n) {
  std::vector<std::int32_t> v(4 * static_cast<std::size_t>(n));
  std::int32_t *as = v.data(), *ae = as + n, *bs = ae + n, *be = bs + n;
  bool nan = false;
  for (int i = 0; i < n; ++i) {
    as[i] = a[i].sig, ae[i] = a[i].exp, bs[i] = b[i].sig, be[i] = b[i].exp;
    nan |= a[i].nan | b[i].nan;
  }
  return wgmma_dot_vec(as, ae, bs, be, n, nan);
}

float wgmma_dot_codes(const std::uint8_t* a, const std::uint8_t* b, int n) {
  std::vector<std::int32_t> v(4 * static_cast<std::size_t>(n));
  std::int32_t *as = v.data(), *ae = as + n, *bs = ae + n, *be = bs + n;
  const bool nan = decode_vec(a, n, as, ae) | decode_vec(b, n, bs, be);
  return wgmma_dot_vec(as, ae, bs, be, n, nan);
}

float head_reduce(const float* s, const float* w, int H, float sc) {
  const int G = H / 8;  // heads per chain
  float P[4];
  for (int c = 0; c < 4; ++c) {
    float chain[2];
    for (int p = 0; p < 2; ++p) {
      const int h0 = 2 * c + p;
      const float r0 = std::fmax(s[h0], 0.0f);  // CUDA fmaxf: NaN operand -> the other one
      float acc;
      if (G == 1) {
        acc = r0 * w[h0];
      } else {
        const float r1 = std::fmax(s[h0 + 8], 0.0f);
        acc = std::fmaf(r0, w[h0], r1 * w[h0 + 8]);  // the compiler contracts the first pair this way
        for (int g = 2; g < G; ++g) acc = std::fmaf(std::fmax(s[h0 + 8 * g], 0.0f), w[h0 + 8 * g], acc);
      }
      chain[p] = acc;
    }
    P[c] = (chain[0] + chain[1]) * sc;
  }
  return (P[0] + P[1]) + (P[2] + P[3]);
}

}  // namespace dsa::profiles::sm90
