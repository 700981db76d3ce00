// Fixed-width integer arithmetic for exact fallbacks (contract way 2: the exact path behind a certified fast path).
#pragma once
#include <cmath>
#include <cstdint>

namespace dsa::num {

__extension__ typedef unsigned __int128 u128;  // GCC/Clang extension (pedantic-clean via __extension__)

// 512-bit two's complement integer.
struct Int512 {
  static constexpr int N = 8;
  std::uint64_t l[N] = {};
  void add_shifted(u128 m, int sh, bool neg) {
    std::uint64_t t[N] = {};
    const int li = sh / 64, bi = sh % 64;
    const std::uint64_t lo = static_cast<std::uint64_t>(m), hi = static_cast<std::uint64_t>(m >> 64);
    std::uint64_t w3[3];
    w3[0] = lo << bi;
    w3[1] = bi ? (hi << bi) | (lo >> (64 - bi)) : hi;
    w3[2] = bi ? hi >> (64 - bi) : 0;
    for (int k = 0; k < 3 && li + k < N; ++k) t[li + k] = w3[k];
    if (neg) {  // t = -t
      unsigned carry = 1;
      for (int k = 0; k < N; ++k) {
        const u128 s = static_cast<u128>(~t[k]) + carry;
        t[k] = static_cast<std::uint64_t>(s);
        carry = static_cast<unsigned>(s >> 64);
      }
    }
    unsigned carry = 0;
    for (int k = 0; k < N; ++k) {
      const u128 s = static_cast<u128>(l[k]) + t[k] + carry;
      l[k] = static_cast<std::uint64_t>(s);
      carry = static_cast<unsigned>(s >> 64);
    }
  }
  bool negative() const { return (l[N - 1] >> 63) != 0; }
  void negate() {
    unsigned carry = 1;
    for (int k = 0; k < N; ++k) {
      const u128 s = static_cast<u128>(~l[k]) + carry;
      l[k] = static_cast<std::uint64_t>(s);
      carry = static_cast<unsigned>(s >> 64);
    }
  }
  void mul(std::uint64_t m) {  // magnitude only
    u128 carry = 0;
    for (int k = 0; k < N; ++k) {
      const u128 p = static_cast<u128>(l[k]) * m + carry;
      l[k] = static_cast<std::uint64_t>(p);
      carry = p >> 64;
    }
  }
  // Magnitude rounded to odd at 53 bits, times 2^exp2.
  double to_double_odd(int exp2) const {
    int top = -1;
    for (int k = N - 1; k >= 0 && top < 0; --k)
      if (l[k]) top = k * 64 + 63 - __builtin_clzll(l[k]);
    if (top < 0) return 0.0;
    auto bit_range = [&](int from, int count) {  // bits [from, from+count), count <= 64
      std::uint64_t r = 0;
      for (int b = 0; b < count; ++b) {
        const int p = from + b;
        if (p >= 0 && ((l[p / 64] >> (p % 64)) & 1u)) r |= std::uint64_t{1} << b;
      }
      return r;
    };
    if (top < 53) return std::ldexp(static_cast<double>(bit_range(0, 53)), exp2);
    const int low = top - 52;
    std::uint64_t m = bit_range(low, 53);
    bool sticky = false;
    for (int p = 0; p < low && !sticky; ++p) sticky = ((l[p / 64] >> (p % 64)) & 1u) != 0;
    if (sticky) m |= 1u;
    return std::ldexp(static_cast<double>(m), exp2 + low);
  }
};


}  // namespace dsa::num
