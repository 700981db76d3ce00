#include "engines/quant/byte_cands.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "numerics/formats.hpp"

namespace dsa::quant {

std::vector<std::uint16_t> bf16_cands(double v, double e) {
  std::vector<std::uint16_t> c{num::f64_to_bf16(v)};
  if (e > 0 && std::isfinite(v))
    for (double x : {v - e, v + e}) {
      const std::uint16_t b = num::f64_to_bf16(x);
      if (std::find(c.begin(), c.end(), b) == c.end()) c.push_back(b);
    }
  return c;
}

void ByteOut::put(std::int64_t off, std::uint8_t v, const std::vector<std::uint8_t>& all) {
  ref.emplace_back(off, v);
  std::vector<std::uint8_t> o;
  for (auto b : all)
    if (b != v && std::find(o.begin(), o.end(), b) == o.end()) o.push_back(b);
  if (!o.empty()) alt.emplace_back(off, std::move(o));
}

void ByteOut::apply(std::uint8_t* bytes, ByteCandMap& cands, std::int64_t lo, std::int64_t hi) const {
  for (const auto& [off, v] : ref)
    if (off >= lo && off < hi) bytes[off - lo] = v;
  for (const auto& [off, all] : alt)
    if (off >= lo && off < hi)
      for (auto b : all) cands[off - lo].push_back(b);
}

void ByteOut::put_f32(std::int64_t off, float v, const std::vector<float>& all) {
  std::uint32_t u, w;
  std::memcpy(&u, &v, 4);
  for (int byte = 0; byte < 4; ++byte) {
    std::vector<std::uint8_t> bs;
    for (float x : all) std::memcpy(&w, &x, 4), bs.push_back(static_cast<std::uint8_t>(w >> (8 * byte)));
    put(off + byte, static_cast<std::uint8_t>(u >> (8 * byte)), bs);
  }
}

Fp8Cands fp8_block_cands(const double* y, const double* ey, std::int64_t n, const ScaleRule& rule) {
  const QuantParams qp{rule, ScaleApply::div, true};
  std::vector<std::vector<std::uint16_t>> cands(static_cast<std::size_t>(n));
  float amax = 0, lo = 0, hi = 0;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    cands[static_cast<std::size_t>(i)] = bf16_cands(y[i], ey[i]);
    float mn = std::numeric_limits<float>::infinity(), mx = 0;
    for (auto b : cands[static_cast<std::size_t>(i)]) {
      const float a = std::fabs(num::bf16_to_f32(b));
      nan |= std::isnan(a);
      mn = std::min(mn, a), mx = std::max(mx, a);
    }
    amax = std::max(amax, std::fabs(num::bf16_to_f32(cands[static_cast<std::size_t>(i)][0])));
    lo = std::max(lo, mn), hi = std::max(hi, mx);
  }
  const BlockScale ref = block_scale(nan ? std::numeric_limits<float>::quiet_NaN() : amax, qp);
  std::vector<BlockScale> all{ref};
  if (!nan)
    for (float a : {lo, hi}) {
      const BlockScale b = block_scale(a, qp);
      bool seen = false;
      for (const auto& x : all) seen |= x.s == b.s;
      if (!seen) all.push_back(b);
    }
  Fp8Cands r;
  auto code = [&](std::uint16_t b, const BlockScale& s) {
    const std::uint8_t k = encode(num::bf16_to_f32(b), s, qp);
    return (k & 0x7F) == 0x7F ? std::uint8_t{0x7F} : k;  // NaN: the CUDA cast's code
  };
  r.codes.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    auto& ks = r.codes[static_cast<std::size_t>(i)];
    ks.push_back(code(cands[static_cast<std::size_t>(i)][0], ref));
    for (const auto& s : all)
      for (auto b : cands[static_cast<std::size_t>(i)]) ks.push_back(code(b, s));
  }
  r.scale = ref.s;
  for (const auto& s : all) r.scales.push_back(s.s);
  return r;
}

void mxfp4_block_cands(const double* y, const double* ey, fp4core::Mx4Rule rule, const fp4core::E2m1Opts& o, ByteOut& out,
                       std::int64_t codes_off, std::int64_t scale_off) {
  std::vector<std::vector<float>> cands(32);
  float xs[32], lo = 0, hi = 0;
  for (int i = 0; i < 32; ++i) {
    const auto bs = bf16_cands(y[i], ey[i]);
    float mn = std::numeric_limits<float>::infinity(), mx = 0;
    for (auto b : bs) {
      const float v = num::bf16_to_f32(b);
      cands[static_cast<std::size_t>(i)].push_back(v);
      mn = std::min(mn, std::fabs(v)), mx = std::max(mx, std::fabs(v));
    }
    xs[i] = cands[static_cast<std::size_t>(i)][0];
    lo = std::max(lo, mn), hi = std::max(hi, mx);
  }
  std::uint8_t packed[16], sb = 0;
  fp4core::mxfp4_block(xs, packed, &sb, rule, o);  // the reference bytes
  // The scale bytes the rule gives for every amax in [lo, hi] (monotone in amax: the two ends and the reference).
  auto scale_byte = [&](float amax) {
    float b[32] = {};
    b[0] = amax;
    std::uint8_t pk[16], s = 0;
    fp4core::mxfp4_block(b, pk, &s, rule, o);
    return s;
  };
  std::vector<std::uint8_t> sbs{sb};
  bool finite = true;
  for (int i = 0; i < 32; ++i) finite = finite && std::isfinite(xs[i]);
  if (finite)
    for (std::uint8_t b = std::min(scale_byte(lo), sb); b <= std::max(scale_byte(hi), sb) && b < 0xFF; ++b)
      if (std::find(sbs.begin(), sbs.end(), b) == sbs.end()) sbs.push_back(b);
  for (int j = 0; j < 16; ++j) {
    std::vector<std::uint8_t> all;
    if (finite)
      for (std::uint8_t s : sbs) {
        const float inv = fp4core::exp2i(127 - static_cast<int>(s));  // 2^-e, e = s - 127 (exact: e in [-127, 127])
        for (float a : cands[static_cast<std::size_t>(2 * j)])
          for (float b : cands[static_cast<std::size_t>(2 * j + 1)]) {
            const std::uint8_t lo4 = fp4core::f32_to_e2m1(fp4core::clampf(a * inv, -6.0f, 6.0f), o);
            const std::uint8_t hi4 = fp4core::f32_to_e2m1(fp4core::clampf(b * inv, -6.0f, 6.0f), o);
            all.push_back(static_cast<std::uint8_t>(lo4 | (hi4 << 4)));
          }
      }
    out.put(codes_off + j, packed[j], all);
  }
  out.put(scale_off, sb, sbs);
}

}  // namespace dsa::quant
