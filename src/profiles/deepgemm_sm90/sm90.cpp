// deepgemm-sm90 emulation: see sm90.hpp and ../shared/specs/sm90_fp8_wgmma.md. Integer implementation of the
// WGMMA chunk model (sm90_core.hpp, shared with the CUDA emulation): every term is an integer multiple of 2^(e-13)
// below 2^16 and a chunk sums at most 33 of them, so int64 is exact throughout.
#include "profiles/deepgemm_sm90/sm90.hpp"
#include "profiles/deepgemm_sm90/sm90_core.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

namespace dsa::profiles::sm90 {

Fp8Op decode_e4m3(std::uint8_t code) {
  Fp8Op o;
  std::int32_t sig, exp;
  o.nan = decode_code(code, sig, exp);
  o.sig = static_cast<std::int8_t>(sig);
  o.exp = static_cast<std::int8_t>(o.nan ? 0 : exp);
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

// The chunk model on SoA int32 operands (sm90_core.hpp). target_clones: an AVX2 version (variable lane shifts)
// chosen at load time, and the portable default; both compute the same integers.
__attribute__((target_clones("avx2", "default")))
float wgmma_dot_vec(const std::int32_t* as, const std::int32_t* ae, const std::int32_t* bs, const std::int32_t* be,
                    int n, bool any_nan) {
  if (any_nan) return std::numeric_limits<float>::quiet_NaN();
  std::int64_t T = 0;
  int u = 0;
  for (int c0 = 0; c0 < n; c0 += 32) wgmma_chunk(as + c0, ae + c0, bs + c0, be + c0, T, u);
  return tu_to_f32(T, u);
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
  return head_reduce_fn([s](int h) { return s[h]; }, w, H, sc);
}

}  // namespace dsa::profiles::sm90
