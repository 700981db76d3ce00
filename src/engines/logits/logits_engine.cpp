// Exact fallback and per-key reduction of the indexer logits core (see logits_engine.hpp).
#include "engines/logits/logits_engine.hpp"

#include <algorithm>
#include <limits>

#include "numerics/wide_int.hpp"

namespace dsa::engines::logits {

using num::u128;

std::uint32_t exact_round(const double* s, const float* w, int H, float sc, bool bf16) {
  int es;
  const double fs = std::frexp(static_cast<double>(sc), &es);
  const auto ms = static_cast<std::uint64_t>(std::ldexp(std::fabs(fs), 24));
  es -= 24;
  struct Term { u128 m; int e; bool neg; };
  std::vector<Term> terms;
  terms.reserve(static_cast<sz>(H));
  int base = std::numeric_limits<int>::max();
  for (int h = 0; h < H; ++h) {
    if (!(s[h] > 0.0) || w[h] == 0.0f) continue;
    const auto n = static_cast<std::uint64_t>(std::ldexp(s[h], 18));  // exact integer < 2^43
    int ew;
    const double fw = std::frexp(static_cast<double>(w[h]), &ew);
    const auto mw = static_cast<std::uint64_t>(std::ldexp(std::fabs(fw), 24));
    terms.push_back({static_cast<u128>(n) * mw, ew - 24, w[h] < 0.0f});
    base = std::min(base, ew - 24);
  }
  if (terms.empty()) return round_to(0.0, bf16);
  num::Int512 acc;
  for (const Term& t : terms) acc.add_shifted(t.m, t.e - base, t.neg);
  bool neg = acc.negative();
  if (neg) acc.negate();
  acc.mul(ms);
  if (sc < 0.0f) neg = !neg;
  const double d = acc.to_double_odd(base - 18 + es);
  return round_to(neg ? -d : d, bf16);
}

std::uint32_t exact_from_codes(const std::uint8_t* q, const std::uint8_t* k, const float* w, float sc, int H, int D, bool bf16) {
  const double* t = e4m3_f64_table();
  std::vector<double> s(static_cast<sz>(H));
  for (int h = 0; h < H; ++h) {
    double x = 0;  // exact in any order, (1)
    for (int d = 0; d < D; ++d) x += t[q[h * D + d]] * t[k[d]];
    s[static_cast<sz>(h)] = x;
  }
  return exact_round(s.data(), w, H, sc, bf16);
}

namespace {

// The n logits from their pre-scale head sums (see (2)): the certified rounding, else exact(k) (the exact fallback),
// stored with M at flat outputs o0 .. o0+n-1.
template <class Exact>
void store_keys(const double* acc, const double* mg, int n, int H, const float* scales, LogitsOut out, i64 o0, Exact exact) {
  for (int k = 0; k < n; ++k) {
    double M;
    std::uint32_t bits;
    if (!core::certify(acc[k], mg[k], scales[k], H, out.bf16, bits, M)) bits = exact(k);
    store_bits(out.value, o0 + k, bits);
    out.M[o0 + k] = M;
    out.defined[o0 + k] = 1;
  }
}

}  // namespace

// One query row (weights at offset wo) against n consecutive keys of a tile, whose exact dot products start at
// c0 (row stride ldc, one column per head): head sums by the ISA path, then the exactly rounded logit (see (2)),
// stored with M at flat outputs o0 .. o0+n-1. scales[k] is key k's kv_scale.
void reduce_keys(const Isa& isa, const double* c0, sz ldc, int n, const WeightsF64& wf, const float* w, sz wo, int H,
                 const float* scales, std::vector<double>& acc, std::vector<double>& mg, LogitsOut out, i64 o0) {
  isa.heads(c0, ldc, n, wf.wd.data() + wo, wf.wa.data() + wo, H, acc.data(), mg.data());
  store_keys(acc.data(), mg.data(), n, H, scales, out, o0,
             [&](int k) { return exact_round(c0 + static_cast<sz>(k) * ldc, w + wo, H, scales[k], out.bf16); });
}

void finish_keys(const double* acc, const double* mg, int n, const float* w, int H, int D, const float* scales,
                 const std::uint8_t* qrow, const std::uint8_t* keys, LogitsOut out, i64 o0) {
  store_keys(acc, mg, n, H, scales, out, o0, [&](int k) {
    return exact_from_codes(qrow, keys + static_cast<sz>(k) * static_cast<sz>(D), w, scales[k], H, D, out.bf16);
  });
}

}  // namespace dsa::engines::logits
