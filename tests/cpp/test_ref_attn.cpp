// Sparse attention (attn.*) and the MLA cache writer (mla.kcache_store): micro-kernel paths, the fp64 engine
// against a direct long-double evaluation, scale conventions and dequant values from the spec, structural errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engines/kv_cache/mla_records.hpp"
#include "layouts/mla_kcache.hpp"
#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "ref_test_util.hpp"
#include "engines/sparse_attn/softmax_scale.hpp"
#include "engines/sparse_attn/sparse_attn.hpp"
#include "stages/attn/sparse_mla_decode/stage.hpp"
#include "stages/attn/v4_out/stage.hpp"
#include "stages/mla/kcache_store/stage.hpp"

using namespace dsa;

namespace {
std::vector<double> randv(Rng& r, std::size_t n, double scale = 1.0) {
  std::vector<double> v(n);
  for (auto& x : v) x = num::bf16_to_f64(num::f64_to_bf16(scale * r.normal()));
  return v;
}
}  // namespace

TEST_CASE("attn: gemm_qk gives identical bits on the generic, AVX2 and AVX-512 paths") {
  // Shapes crossing every tile edge: head blocks of 2/4/6/8, 1-3 panel tiles, dim chunks of 64 (D not a multiple);
  // NaN and inf among the values.
  struct Shape {
    std::int64_t Hp, D, np;
  };
  const Shape shapes[] = {{8, 576, 24}, {4, 3, 8}, {12, 130, 40}, {20, 64, 56}, {28, 4096, 16}};
  for (attn::GemmIsa isa : {attn::GemmIsa::avx2, attn::GemmIsa::avx512}) {
    const char* name = isa == attn::GemmIsa::avx2 ? "AVX2" : "AVX-512";
    if (!attn::gemm_isa_supported(isa)) {
      MESSAGE("skipped: this CPU has no " << std::string(name) << " (the path is tested where it runs)");
      continue;
    }
    for (const Shape& z : shapes) {
      INFO(name << " Hp " << z.Hp << " D " << z.D << " np " << z.np);
      Rng r(7 + static_cast<std::uint64_t>(z.D));
      auto Q = randv(r, static_cast<std::size_t>(z.Hp * z.D)), Kp = randv(r, static_cast<std::size_t>(z.np * z.D));
      Q[1] = INFINITY, Kp[5] = NAN;
      std::vector<double> a(static_cast<std::size_t>(z.Hp * z.np)), b(a.size());
      attn::gemm_qk(Q.data(), z.Hp, Kp.data(), z.np, z.D, a.data(), isa);
      attn::gemm_qk(Q.data(), z.Hp, Kp.data(), z.np, z.D, b.data(), attn::GemmIsa::generic);
      CHECK(std::memcmp(a.data(), b.data(), a.size() * 8) == 0);
      // Query rows at a longer stride (the compressor pads them): the same values.
      const std::int64_t ldq = z.D + 5;
      std::vector<double> Qs(static_cast<std::size_t>(z.Hp * ldq), -7.0), c(a.size());
      for (std::int64_t h = 0; h < z.Hp; ++h)
        std::copy_n(Q.data() + h * z.D, z.D, Qs.data() + h * ldq);
      attn::gemm_qk(Qs.data(), z.Hp, Kp.data(), z.np, z.D, c.data(), isa, ldq);
      CHECK(std::memcmp(a.data(), c.data(), a.size() * 8) == 0);
      attn::gemm_qk(Qs.data(), z.Hp, Kp.data(), z.np, z.D, c.data(), attn::GemmIsa::generic, ldq);
      CHECK(std::memcmp(a.data(), c.data(), a.size() * 8) == 0);
    }
  }
}

namespace {
// Equal bits, or both NaN (a NaN's payload depends on which operand an instruction takes it from; the outputs
// canonicalize NaNs).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 8) != 0 && !(std::isnan(a[i]) && std::isnan(b[i]))) return false;
  return true;
}
}  // namespace

TEST_CASE("attn: the row engine's kernels equal their scalar definitions bit for bit on every path") {
  // Shapes crossing every tile and chunk edge of row_kernels.cpp: head blocks of 8..72 (tiles of 64 / 32 / 16 / 8
  // heads), key counts around the QK key block (48), the tiles' key tails (3 / 5 / 8) and the PV chunk (32), dims
  // around the 64-dim chunk, dv 8 / 24 / 512 (16-column pairs and a single 8-column tail); odd row strides. NaN, inf
  // and zero weights among the values.
  struct Shape {
    std::int64_t hb, D, n, dv;
  };
  const Shape shapes[] = {{64, 576, 97, 512}, {8, 3, 1, 8}, {24, 130, 49, 24}, {40, 64, 33, 64}, {72, 65, 5, 8}, {16, 200, 300, 136}};
  for (const Shape& z : shapes) {
    const std::int64_t ldk = z.D + 5, lds = z.hb + 3, ldo = z.dv + 9;
    Rng r(31 + static_cast<std::uint64_t>(z.n));
    auto K = randv(r, static_cast<std::size_t>(z.n * ldk)), Qt = randv(r, static_cast<std::size_t>(z.D * z.hb), 0.2);
    K[static_cast<std::size_t>(ldk * (z.n / 2) + 1)] = NAN, Qt[3] = INFINITY;
    if (z.n > 2) K[static_cast<std::size_t>(ldk + 2)] = -INFINITY;
    // The definitions, written out: S = fma chains over d; the scan, the exp with a per-head m, L; O / M chains over t.
    std::vector<double> S(static_cast<std::size_t>(z.n * lds), -7.0), m(static_cast<std::size_t>(z.hb)), zmax(m.size()), L(m.size()),
        s2(static_cast<std::size_t>(z.n)), O(static_cast<std::size_t>(z.hb * ldo), -7.0), M(O.size(), -7.0);
    std::vector<unsigned char> nan(m.size()), keep(m.size());
    const double sm = 0.0721;
    for (std::int64_t t = 0; t < z.n; ++t) {
      double q = 0;
      for (std::int64_t d = 0; d < z.D; ++d) q += K[static_cast<std::size_t>(t * ldk + d)] * K[static_cast<std::size_t>(t * ldk + d)];
      s2[static_cast<std::size_t>(t)] = q;
      for (std::int64_t h = 0; h < z.hb; ++h) {
        double acc = 0;
        for (std::int64_t d = 0; d < z.D; ++d) acc = std::fma(Qt[static_cast<std::size_t>(d * z.hb + h)], K[static_cast<std::size_t>(t * ldk + d)], acc);
        S[static_cast<std::size_t>(t * lds + h)] = acc;
      }
    }
    std::vector<double> Z = S, P = S;
    for (std::int64_t h = 0; h < z.hb; ++h) {
      double mh = -INFINITY, zh = 0;
      bool nh = false;
      for (std::int64_t t = 0; t < z.n; ++t) {
        const double v = sm * S[static_cast<std::size_t>(t * lds + h)];
        Z[static_cast<std::size_t>(t * lds + h)] = v;
        nh = nh || std::isnan(v);
        if (v > mh) mh = v;
        if (zh < std::fabs(v)) zh = std::fabs(v);
      }
      m[static_cast<std::size_t>(h)] = mh, zmax[static_cast<std::size_t>(h)] = zh, nan[static_cast<std::size_t>(h)] = nh;
      keep[static_cast<std::size_t>(h)] = h % 5 != 3;
      double l = 0;
      for (std::int64_t t = 0; t < z.n; ++t) {
        const double p = keep[static_cast<std::size_t>(h)] ? num::det_exp(Z[static_cast<std::size_t>(t * lds + h)] - mh) : 0.0;
        P[static_cast<std::size_t>(t * lds + h)] = p;
        l += p;
      }
      L[static_cast<std::size_t>(h)] = l;
      for (std::int64_t c = 0; c < z.dv; ++c) {
        double o = 0, mg = 0;
        for (std::int64_t t = 0; t < z.n; ++t) {
          const double p = P[static_cast<std::size_t>(t * lds + h)], v = K[static_cast<std::size_t>(t * ldk + c)];
          o = std::fma(p, v, o), mg = std::fma(p, std::fabs(v), mg);
        }
        O[static_cast<std::size_t>(h * ldo + c)] = o, M[static_cast<std::size_t>(h * ldo + c)] = mg;
      }
    }
    for (attn::GemmIsa isa : {attn::GemmIsa::generic, attn::GemmIsa::avx2, attn::GemmIsa::avx512}) {
      INFO("isa " << static_cast<int>(isa) << " hb " << z.hb << " D " << z.D << " n " << z.n << " dv " << z.dv);
      if (!attn::gemm_isa_supported(isa)) {
        MESSAGE("skipped: this CPU lacks ISA path " << static_cast<int>(isa) << " (tested where it runs)");
        continue;
      }
      std::vector<double> gS(S.size(), -7.0), gm(m.size()), gz(m.size()), gL(m.size()), g2(s2.size()), gO(O.size(), -7.0), gM(O.size(), -7.0);
      std::vector<unsigned char> gn(m.size());
      attn::row_key_norms(K.data(), ldk, z.n, z.D, g2.data(), isa);
      CHECK(same_bits(g2, s2));
      attn::row_qk(K.data(), ldk, z.n, Qt.data(), z.hb, z.D, gS.data(), lds, isa);
      CHECK(same_bits(gS, S));
      attn::row_scan(gS.data(), lds, z.n, z.hb, sm, gm.data(), gz.data(), gn.data(), isa);
      CHECK(same_bits(gS, Z));
      CHECK(same_bits(gm, m));
      CHECK(same_bits(gz, zmax));
      CHECK(gn == nan);
      attn::row_exp(gS.data(), lds, z.n, z.hb, m.data(), keep.data(), gL.data(), isa);
      CHECK(same_bits(gS, P));
      CHECK(same_bits(gL, L));
      attn::row_pv(P.data(), lds, z.hb, z.n, K.data(), ldk, z.dv, gO.data(), gM.data(), ldo, isa);
      CHECK(same_bits(gO, O));
      CHECK(same_bits(gM, M));
      // In two calls, the second continuing the chains of the first (accumulate): the same bits.
      const std::int64_t n1 = z.n / 3;
      std::vector<double> cO(O.size(), -7.0), cM(O.size(), -7.0);
      attn::row_pv(P.data(), lds, z.hb, n1, K.data(), ldk, z.dv, cO.data(), cM.data(), ldo, isa);
      attn::row_pv(P.data() + n1 * lds, lds, z.hb, z.n - n1, K.data() + n1 * ldk, ldk, z.dv, cO.data(), cM.data(), ldo, isa, true);
      CHECK(same_bits(cO, O));
      CHECK(same_bits(cM, M));
    }
  }
}

TEST_CASE("attn: row_exp is det_exp lane by lane on every path, with a max per head") {
  // Random arguments over det_exp's whole range, the special values, the cutoffs 709.8 / -746 and their neighbours,
  // subnormal results, odd and even negative k (k / 2 truncated toward zero), k at rounding midpoints; 8 heads, each
  // with its own m.
  Rng r(3);
  std::vector<double> x;
  for (int i = 0; i < 20000; ++i) x.push_back((r.uniform() * 2 - 1) * (i % 3 == 0 ? 800.0 : i % 3 == 1 ? 40.0 : 1.0));
  for (double v : {0.0, -0.0, 709.8, -746.0, 709.7, -745.9, 1e300, -1e300, -708.5, -740.0, -744.4, 0.5 * 0.6931471805599453,
                   -1.5 * 0.6931471805599453, -2.5 * 0.6931471805599453, 5e-324, -5e-324})
    x.push_back(v), x.push_back(std::nextafter(v, 1e308)), x.push_back(std::nextafter(v, -1e308));
  x.push_back(INFINITY), x.push_back(-INFINITY), x.push_back(NAN), x.push_back(-NAN);
  while (x.size() % 8) x.push_back(0.25);
  const std::int64_t hb = 8, n = static_cast<std::int64_t>(x.size()) / 8, lds = 11;
  const std::vector<double> m = {0.0, 3.25, -17.0, 0.0, 1.0, -0.5, 700.0, -700.0};
  const std::vector<unsigned char> keep = {1, 1, 1, 0, 1, 1, 1, 1};
  std::vector<double> in(static_cast<std::size_t>(n * lds)), want(in.size()), wantL(8, 0.0);
  for (std::int64_t t = 0; t < n; ++t)
    for (std::int64_t h = 0; h < hb; ++h) {
      const double v = x[static_cast<std::size_t>(t * hb + h)] + m[static_cast<std::size_t>(h)];
      in[static_cast<std::size_t>(t * lds + h)] = v;
      const double p = keep[static_cast<std::size_t>(h)] ? num::det_exp(v - m[static_cast<std::size_t>(h)]) : 0.0;
      want[static_cast<std::size_t>(t * lds + h)] = p;
      wantL[static_cast<std::size_t>(h)] += p;
    }
  for (attn::GemmIsa isa : {attn::GemmIsa::generic, attn::GemmIsa::avx2, attn::GemmIsa::avx512}) {
    if (!attn::gemm_isa_supported(isa)) {
      MESSAGE("skipped: this CPU lacks ISA path " << static_cast<int>(isa) << " (tested where it runs)");
      continue;
    }
    std::vector<double> got = in, L(8);
    attn::row_exp(got.data(), lds, n, hb, m.data(), keep.data(), L.data(), isa);
    std::size_t bad = 0;
    for (std::int64_t t = 0; t < n; ++t)
      for (std::int64_t h = 0; h < hb; ++h) {
        const std::size_t i = static_cast<std::size_t>(t * lds + h);
        if (std::memcmp(&got[i], &want[i], 8) != 0 && !(std::isnan(got[i]) && std::isnan(want[i])) && bad++ < 3)
          MESSAGE("isa " << static_cast<int>(isa) << " x " << in[i] << " m " << m[static_cast<std::size_t>(h)] << ": " << got[i] << " != " << want[i]);
      }
    CHECK(bad == 0);
    for (std::int64_t h = 0; h < hb; ++h)
      CHECK((std::memcmp(&L[static_cast<std::size_t>(h)], &wantL[static_cast<std::size_t>(h)], 8) == 0 ||
             (std::isnan(L[static_cast<std::size_t>(h)]) && std::isnan(wantL[static_cast<std::size_t>(h)]))));
  }
}

TEST_CASE("attn: the fp64 row engine matches a direct long-double softmax attention") {
  Rng r(11);
  const std::int64_t H = 5, D = 576, dv = 512, n = 37;
  const double sm = 0.1352337788608801;
  attn::RowEngine e;
  e.reset(H, D, dv, n);
  auto Q = randv(r, H * D), K = randv(r, n * D, 0.5);
  for (std::int64_t h = 0; h < H; ++h) std::copy_n(Q.data() + h * D, D, e.q(h));
  for (std::int64_t t = 0; t < n; ++t) std::copy_n(K.data() + t * D, D, e.key(t));
  e.run(sm);
  for (std::int64_t h = 0; h < H; ++h) {
    std::vector<long double> z(n);
    long double m = -INFINITY;
    for (std::int64_t t = 0; t < n; ++t) {
      long double s = 0;
      for (std::int64_t d = 0; d < D; ++d) s += static_cast<long double>(Q[h * D + d]) * K[t * D + d];
      z[t] = s * sm;
      m = std::max(m, z[t]);
    }
    long double L = 0;
    for (auto& x : z) L += std::exp(x - m);
    const long double lse = m + std::log(L);
    CHECK(std::fabs(static_cast<double>(lse) - e.head(h).lse) <= 1e-13 * std::fabs(static_cast<double>(lse)) + 1e-14);
    CHECK(std::fabs(static_cast<double>(m) - e.head(h).m) <= 1e-13 * std::fabs(static_cast<double>(m)));
    for (std::int64_t c = 0; c < dv; c += 37) {
      long double o = 0, mg = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        o += std::exp(z[t] - lse) * K[t * D + c];
        mg += std::exp(z[t] - lse) * std::fabs(K[t * D + c]);
      }
      CHECK(std::fabs(static_cast<double>(o) - e.out(h)[c]) <= 1e-13 * static_cast<double>(mg));
      CHECK(std::fabs(static_cast<double>(mg) - e.mag(h)[c]) <= 1e-13 * static_cast<double>(mg));
    }
    // The derived bound of out is at least the two bf16 roundings (2^-7) and far below 1 here.
    CHECK(e.view().out_rel(h) >= 0x1p-7);
    CHECK(e.view().out_rel(h) < 0.05);
  }
}

TEST_CASE("attn: no valid key = lonely (out 0, lse -inf internally) - a NaN key makes every head NaN") {
  attn::RowEngine e;
  e.reset(3, 576, 512, 0);
  e.run(0.1);
  CHECK(e.head(0).lonely);
  CHECK(e.head(2).lse == -INFINITY);
  CHECK(e.out(1)[5] == 0.0);
  e.reset(2, 576, 512, 2);
  for (std::int64_t d = 0; d < 576; ++d) e.q(0)[d] = e.q(1)[d] = 0.01, e.key(0)[d] = e.key(1)[d] = 1.0;
  e.key(1)[7] = std::nan("");
  e.run(0.1);
  CHECK(e.head(0).nan);
  CHECK(std::isnan(e.out(1)[0]));
}

TEST_CASE("mla.kcache_store: scale conventions of spec v32 §6.3 on hand-made tiles") {
  using L = layouts::MlaKCache;
  auto store = [](const char* fmt, double amax, std::uint8_t* rec) {
    dsa::quant::QuantParams q;
    if (std::string(fmt) == "pow2") q.scale = dsa::quant::pow2_rule();
    if (std::string(fmt) == "ue8m0") q.scale = dsa::quant::ue8m0_rule();
    if (std::string(fmt) == "amax448") q.scale = dsa::quant::fp32_div_rule(0.0f);
    std::vector<std::uint16_t> c(512, 0), pe(64, 0x3F80);
    for (int j = 0; j < 4; ++j) c[static_cast<std::size_t>(j * 128 + 3)] = num::f64_to_bf16(amax);
    engines::kv_cache::store_mla_token(q, c.data(), pe.data(), rec);
    return layouts::MlaToken{rec}.scale(0);
  };
  std::vector<std::uint8_t> rec(L::kRecord);
  CHECK(store("pow2", 336.0, rec.data()) == 1.0f);  // vLLM's test: 336/448 = 0.75 -> 1.0
  CHECK(rec[3] == 0x7A);  // 336 = 1.3125 * 2^8 lies halfway between 320 and 352: RNE to the even code 0x7A (320)
  CHECK(store("pow2", 448.0, rec.data()) == 1.0f);
  CHECK(store("pow2", 0.0, rec.data()) == std::ldexp(1.0f, -13));  // zero tile: 2^ceil(log2 1e-4)
  CHECK(store("ue8m0", 0.0, rec.data()) == std::ldexp(1.0f, -22)); // demo: 1e-4 * fl32(1/448) -> 2^-22
  CHECK(store("amax448", 0.0, rec.data()) == 0.0f);                // no eps: scale 0 and NaN codes
  CHECK(rec[0] == 0x7F);
  CHECK(layouts::MlaToken{rec.data()}.rope_bits(63) == 0x3F80);
  CHECK(layouts::MlaKCache{}.describe(512 + 4 * 2 + 1 + 3 * L::kRecord) == "page 0 token 3 scale tile 2 byte 1");
}

TEST_CASE("attn.sparse_mla_decode: the SM90 dequant rounds a non-pow2 scale to bf16 first") {
  using L = layouts::MlaKCache;
  std::vector<std::uint8_t> rec(L::kRecord, 0);
  rec[0] = 0x3E;  // e4m3 1.75
  const float third = 1.0f / 3.0f;
  for (int j = 0; j < 4; ++j) std::memcpy(rec.data() + L::kScaleOff + 4 * j, &third, 4);
  double k[576];
  attn::sparse_mla_decode::dequant_key(rec.data(), true, k);
  CHECK(k[0] == 0.5859375);   // bf16(1.75 * bf16(1/3) = 1.75 * 0.333984375 = 0.58447...) = 150 * 2^-8
  attn::sparse_mla_decode::dequant_key(rec.data(), false, k);
  CHECK(k[0] == 0.58203125);  // bf16(fl32(1.75 * fl32(1/3)) = 0.5833334) = 149 * 2^-8
}

TEST_CASE("attn stages: structural input errors are problems naming the tensor") {
  SUBCASE("decode index past the cache") {
    Case c;
    c.file = "f.h5", c.name = "c", c.stage = "attn.sparse_mla_decode";
    c.inputs["q"] = Tensor(DType::bf16, {1, 1, 2, 576});
    c.inputs["k_cache"] = Tensor(DType::u8, {1, 64, 1, 656});
    Tensor idx(DType::i32, {1, 1, 64});
    for (int i = 0; i < 64; ++i) idx.data<std::int32_t>()[i] = i == 5 ? 64 : (i == 6 ? -2 : -1);
    c.inputs["indices"] = idx;
    apply_attr_defaults(c);
    const auto p = validate_case(c);
    REQUIRE(p.size() == 1);
    CHECK(p[0].str().find("inputs/indices") != std::string::npos);
    CHECK(p[0].str().find("position 5: 64") != std::string::npos);
  }
  SUBCASE("prefill topk_length above topk, sink with the 2025 lse base") {
    Case c;
    c.file = "f.h5", c.name = "c", c.stage = "attn.sparse_mla_prefill";
    c.inputs["q"] = Tensor(DType::bf16, {2, 2, 576});
    c.inputs["kv"] = Tensor(DType::bf16, {8, 1, 576});
    c.inputs["indices"] = Tensor(DType::i32, {2, 1, 4});
    c.inputs["attn_sink"] = Tensor(DType::f32, {2});
    Tensor tl(DType::i32, {2});
    tl.data<std::int32_t>()[1] = 5;
    c.inputs["topk_length"] = tl;
    c.attrs["lse_base"] = std::string("2");
    c.attrs["softmax_scale"] = 0.1352337788608801;
    apply_attr_defaults(c);
    const auto p = validate_case(c);
    REQUIRE(p.size() == 2);
    CHECK(p[0].str().find("attn_sink") != std::string::npos);
    CHECK(p[1].str().find("topk_length") != std::string::npos);
  }
}

TEST_CASE("attn: flash_mla_sparse_fwd's scale has no default - an absent one is a problem naming the attr") {
  Case c;
  c.file = "f.h5", c.name = "c", c.stage = "attn.sparse_mla_prefill";
  c.inputs["q"] = Tensor(DType::bf16, {2, 2, 576});
  c.inputs["kv"] = Tensor(DType::bf16, {8, 1, 576});
  c.inputs["indices"] = Tensor(DType::i32, {2, 1, 4});
  apply_attr_defaults(c);
  const auto p = validate_case(c);
  REQUIRE(p.size() == 1);
  CHECK(p[0].str().find("attr softmax_scale: expected a number: flash_mla_sparse_fwd takes sm_scale without a default") !=
        std::string::npos);
}

TEST_CASE("attn: softmax_scale default d^-0.5 equals Python's d ** -0.5 for the head dims engines use") {
  // Values printed by CPython 3.11 (`repr(d ** -0.5)`), an independent computation (libm pow).
  CHECK(dsa::sparse_attn::inv_sqrt(64) == 0.125);
  CHECK(dsa::sparse_attn::inv_sqrt(128) == 0.08838834764831845);
  CHECK(dsa::sparse_attn::inv_sqrt(192) == 0.07216878364870322);
  CHECK(dsa::sparse_attn::inv_sqrt(256) == 0.0625);
  CHECK(dsa::sparse_attn::inv_sqrt(512) == 0.04419417382415922);
  CHECK(dsa::sparse_attn::inv_sqrt(576) == 0.041666666666666664);
}

TEST_CASE("attn.v4_out: the blocked CPU GEMMs equal core.hpp's element functions (the CUDA kernels' definition)") {
  // T crossing the 64-token block, R and dim crossing the 64-output items and the 8-key panels; NaN / inf among the
  // activations and weights; every Bug variant (the group gathers and weight rows they change).
  using attn::v4_out::Bug;
  attn::v4_out::Params p;
  p.T = 67, p.N = 4, p.D = 80, p.rope = 64, p.G = 2, p.R = 13, p.dim = 70;
  const std::int64_t Ka = p.N * p.D / p.G, Kb = p.G * p.R;
  Rng r(4040);
  auto bf = [&](Tensor& t, double sc) {
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<std::uint16_t>()[i] = num::f64_to_bf16(sc * r.normal());
  };
  Case c;
  c.name = "v4_out_blocked";
  c.stage = "attn.v4_out";
  Tensor o(DType::bf16, {p.T, p.N, p.D}), cs(DType::f32, {p.T, p.rope}), sn(DType::f32, {p.T, p.rope}), wa(DType::bf16, {p.G * p.R, Ka}),
      wb(DType::bf16, {p.dim, Kb});
  bf(o, 1.0), bf(wa, 0.05), bf(wb, 0.05);
  for (std::int64_t i = 0; i < cs.numel(); ++i) {
    const double a = r.uniform() * 6.28;
    cs.data<float>()[i] = static_cast<float>(std::cos(a)), sn.data<float>()[i] = static_cast<float>(std::sin(a));
  }
  o.data<std::uint16_t>()[3 * p.N * p.D + 7] = 0x7FC0;         // NaN in token 3
  o.data<std::uint16_t>()[65 * p.N * p.D + 70] = 0x7F80;       // inf in token 65 (a rope dim)
  wa.data<std::uint16_t>()[5 * Ka + 2] = 0xFF80;               // -inf in a wo_a row
  wb.data<std::uint16_t>()[66 * Kb + 1] = 0x7FC0;              // NaN in a wo_b row past the first item
  c.inputs = {{"o", o}, {"cos", cs}, {"sin", sn}, {"wo_a", wa}, {"wo_b", wb}};
  for (Bug bug : {Bug::none, Bug::groups_permuted, Bug::heads_strided, Bug::forward_rope}) {
    INFO("bug " << static_cast<int>(bug));
    const Expected e = attn::v4_out::run(c, p, bug, 2);
    attn::v4_out::Outputs x = attn::v4_out::make_outputs(p);
    const attn::v4_out::Dims dm = attn::v4_out::dims(p);
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t h = 0; h < p.N; ++h)
        for (std::int64_t d = 0; d < p.D; ++d)
          attn::v4_out::rot_elem(dm, o.data<std::uint16_t>(), cs.data<float>(), sn.data<float>(), t, h, d, bug, x.rot.data<std::uint16_t>(),
                                 x.rot_m.data<double>());
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t g = 0; g < p.G; ++g)
        for (std::int64_t rr = 0; rr < p.R; ++rr)
          attn::v4_out::lora_elem(dm, x.rot.data<std::uint16_t>(), x.rot_m.data<double>(), wa.data<std::uint16_t>(), attn::v4_out::gamma_sum(Ka), t,
                                  g, rr, bug, x.ua.data<std::uint16_t>(), x.ua_m.data<double>());
    for (std::int64_t t = 0; t < p.T; ++t)
      for (std::int64_t d = 0; d < p.dim; ++d)
        attn::v4_out::out_elem(dm, x.ua.data<std::uint16_t>(), x.ua_m.data<double>(), wb.data<std::uint16_t>(), attn::v4_out::gamma_sum(Kb), t, d,
                               x.y.data<std::uint16_t>(), x.y_m.data<double>());
    const Tensor* want[3][2] = {{&x.rot, &x.rot_m}, {&x.ua, &x.ua_m}, {&x.y, &x.y_m}};
    REQUIRE(e.tensors.size() == 3);
    std::int64_t nonfinite = 0;
    for (int k = 0; k < 3; ++k) {
      INFO(e.tensors[k].name);
      const Tensor& v = e.tensors[k].value;
      const Tensor& m = e.tensors[k].magnitude;
      REQUIRE(v.numel() == want[k][0]->numel());
      CHECK(std::memcmp(v.raw(), want[k][0]->raw(), static_cast<std::size_t>(v.nbytes())) == 0);
      CHECK(std::memcmp(m.raw(), want[k][1]->raw(), static_cast<std::size_t>(m.nbytes())) == 0);
      for (std::int64_t i = 0; i < v.numel(); ++i) nonfinite += (v.data<std::uint16_t>()[i] & 0x7F80) == 0x7F80;
    }
    CHECK(nonfinite > 0);  // the NaN / inf reached the outputs
  }
}
