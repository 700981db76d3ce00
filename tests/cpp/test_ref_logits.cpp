// indexer.logits_ragged / indexer.logits_paged exact references. Expected values come from first principles in
// this file: fp8 codes decoded by integer arithmetic, exact dot products in int64 (units of 2^-18), the head
// reduction in binary128 (exact for these inputs: <= 67 + 24 + weight spread < 113 bits), rounded once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda.hpp"
#include "engines/logits/logits_simd.hpp"
#include "numerics/formats.hpp"
#include "stage/stage.hpp"

using namespace dsa;
using i64 = std::int64_t;
__extension__ typedef __float128 f128;

namespace {

// e4m3fn code -> value * 2^9 as an integer (exact: every finite e4m3 value is a multiple of 2^-9).
i64 code_x512(std::uint8_t c) {
  const int e = (c >> 3) & 15, m = c & 7;
  const i64 mag = e == 0 ? m : (i64{8 + m} << (e - 1));  // normal: (8+m) * 2^(e-7-3) * 2^9 = (8+m) << (e-1)
  return (c & 0x80) ? -mag : mag;
}
// exact dot product in units of 2^-18
i64 dot_units(const std::uint8_t* a, const std::uint8_t* b, i64 D) {
  i64 s = 0;
  for (i64 d = 0; d < D; ++d) s += code_x512(a[d]) * code_x512(b[d]);
  return s;
}
std::uint8_t rand_code(std::mt19937_64& g) {
  for (;;) {
    const auto c = static_cast<std::uint8_t>(g() & 0xFF);
    if ((c & 0x7F) != 0x7F) return c;
  }
}
float rand_weight(std::mt19937_64& g) {  // +-[2^-6, 2^2), 10 mantissa bits
  const double m = 1.0 + static_cast<double>(g() % 1024) / 1024.0;
  return static_cast<float>(std::ldexp((g() & 1) ? -m : m, static_cast<int>(g() % 8) - 6));
}
// logit from first principles: sc * sum_h relu(s_h) W_h, exact in binary128, then one rounding.
struct Truth {
  float f32;
  std::uint16_t bf16;
  double M;
};
Truth truth(const std::uint8_t* q /*[H][D]*/, const std::uint8_t* k, const float* w, float sc, i64 H, i64 D) {
  f128 acc = 0, mag = 0;
  for (i64 h = 0; h < H; ++h) {
    const i64 s = dot_units(q + h * D, k, D);
    if (s <= 0) continue;
    const f128 r = static_cast<f128>(s) / 262144;  // exact: 2^-18 scaling
    acc += r * static_cast<f128>(w[h]);
    mag += r * static_cast<f128>(std::fabs(w[h]));
  }
  const f128 v = acc * static_cast<f128>(sc);
  return {static_cast<float>(v), num::f64_to_bf16(static_cast<double>(v)), static_cast<double>(mag * static_cast<f128>(sc))};
}

Tensor codes(Shape s, std::mt19937_64& g) {
  Tensor t(DType::fp8_e4m3fn, std::move(s));
  for (auto& c : t.span<std::uint8_t>()) c = rand_code(g);
  return t;
}
Tensor weights(Shape s, std::mt19937_64& g) {
  Tensor t(DType::f32, std::move(s));
  for (auto& x : t.span<float>()) x = rand_weight(g);
  return t;
}
Tensor i32(std::vector<std::int32_t> v, Shape s) { return Tensor::from_vector(DType::i32, std::move(s), v); }

Case ragged(i64 S, i64 H, i64 D, i64 N, std::mt19937_64& g, std::vector<std::int32_t> ks, std::vector<std::int32_t> ke,
            bool clean, i64 msk = 0, const std::string& dtype = "float32") {
  Case c;
  c.name = "t";
  c.stage = "indexer.logits_ragged";
  c.inputs["q"] = codes({S, H, D}, g);
  c.inputs["kv"] = codes({N, D}, g);
  Tensor sc(DType::f32, {N});
  for (auto& x : sc.span<float>()) x = std::ldexp(1.0f + static_cast<float>(g() % 256) / 256.0f, static_cast<int>(g() % 6) - 10);
  c.inputs["kv_scale"] = sc;
  c.inputs["weights"] = weights({S, H}, g);
  c.inputs["ks"] = i32(ks, {S});
  c.inputs["ke"] = i32(ke, {S});
  c.attrs["clean_logits"] = i64{clean ? 1 : 0};
  c.attrs["max_seqlen_k"] = msk;
  c.attrs["logits_dtype"] = dtype;
  return c;
}

Expected run(Case& c, int threads = 0, bool emu = false) {
  apply_attr_defaults(c);
  const auto probs = validate_case(c, false);
  for (const auto& p : probs) MESSAGE(p.str());
  REQUIRE(probs.empty());
  RefOptions o;
  o.threads = threads;
  if (emu) o.emulation = find_profile("deepgemm-sm90");
  return run_reference(c, o);
}

// Checks every defined element of a ragged result against first principles.
void check_ragged_truth(const Case& c, const RefTensor& rt) {
  const Tensor& q = c.input("q");
  const i64 S = q.dim(0), H = q.dim(1), D = q.dim(2), N = c.input("kv").dim(0);
  const i64 msk = c.attr_int("max_seqlen_k");
  const bool bf16 = c.attr_str("logits_dtype") == "bf16";
  const i64 cols = rt.value.dim(1);
  i64 bad = 0, checked = 0;
  for (i64 i = 0; i < S; ++i) {
    const i64 ks = c.input("ks").data<std::int32_t>()[i], ke = c.input("ke").data<std::int32_t>()[i];
    for (i64 col = 0; col < cols; ++col) {
      const i64 j = msk > 0 ? ks + col : col;
      const bool valid = j >= ks && j < ke && j < N;
      const i64 f = i * cols + col;
      const bool def = rt.defined.data<std::uint8_t>()[f] != 0;
      if (c.attr_bool("clean_logits")) {
        CHECK(def);
        if (!valid) bad += !(std::isinf(rt.value.value(f)) && rt.value.value(f) < 0);
      } else {
        bad += def != valid;
      }
      if (!valid) continue;
      const Truth t = truth(q.data<std::uint8_t>() + i * H * D, c.input("kv").data<std::uint8_t>() + j * D,
                            c.input("weights").data<float>() + i * H, c.input("kv_scale").data<float>()[j], H, D);
      ++checked;
      bad += bf16 ? rt.value.bits(f) != t.bf16 : rt.value.bits(f) != num::f32_bits(t.f32);
      bad += std::fabs(rt.magnitude.data<double>()[f] - t.M) > 1e-12 * t.M;
    }
  }
  CHECK(checked > 0);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("ref.logits.dot_exact_vs_integer_random_and_adversarial") {
  // Two heads q and -q with W = +1 / -1, kv_scale 1: logit = relu(s) - relu(-s) = s, rounded once to fp32.
  std::mt19937_64 g(1);
  for (i64 D : {32, 64, 128}) {
    const i64 S = 6, N = 40, H = 8;
    Case c = ragged(S, H, D, N, g, std::vector<std::int32_t>(S, 0), std::vector<std::int32_t>(S, static_cast<std::int32_t>(N)), true);
    auto* q = c.inputs["q"].data<std::uint8_t>();
    auto* k = c.inputs["kv"].data<std::uint8_t>();
    for (i64 i = 0; i < S; ++i)
      for (i64 d = 0; d < D; ++d) {
        std::uint8_t v;
        if (i < 2) v = (d % 2 == 0) ? 0x7E : 0x01;                    // 448, 2^-9 alternating
        else v = rand_code(g);
        q[(i * H + 0) * D + d] = v;
        q[(i * H + 1) * D + d] = static_cast<std::uint8_t>(v ^ 0x80);
        for (i64 h = 2; h < H; ++h) q[(i * H + h) * D + d] = 0;
      }
    for (i64 j = 0; j < N; ++j)
      for (i64 d = 0; d < D; ++d) {
        std::uint8_t v;
        if (j < 4) v = (d % 2 == 0) ? ((d / 2 + static_cast<i64>(j)) % 2 ? 0x7E : 0xFE) : (j % 2 ? 0x01 : 0x81);  // +-448 cancel, tiny survive
        else v = rand_code(g);
        k[j * D + d] = v;
      }
    for (i64 i = 0; i < S; ++i) {
      float* w = c.inputs["weights"].data<float>() + i * H;
      std::fill(w, w + H, 0.0f);
      w[0] = 1.0f;
      w[1] = -1.0f;
    }
    std::fill_n(c.inputs["kv_scale"].data<float>(), N, 1.0f);
    const Expected e = run(c);
    const Tensor& v = e.tensors[0].value;
    i64 bad = 0, fp32_naive_differs = 0;
    for (i64 i = 0; i < S; ++i)
      for (i64 j = 0; j < N; ++j) {
        const i64 s = dot_units(q + i * H * D, k + j * D, D);
        const float want = static_cast<float>(static_cast<double>(s) / 262144.0);  // s < 2^43: exact double, one rounding
        bad += num::f32_bits(v.data<float>()[i * N + j]) != num::f32_bits(want);
        float naive = 0;  // what a sequential fp32 sum would give
        for (i64 d = 0; d < D; ++d) naive += num::e4m3_to_f32(q[i * H * D + d]) * num::e4m3_to_f32(k[j * D + d]);
        fp32_naive_differs += naive != want;
      }
    CHECK(bad == 0);
    CHECK(fp32_naive_differs > 0);  // the adversarial rows really lose bits in fp32
  }
}

TEST_CASE("ref.logits.hand_checked_tiny") {
  // H = 8, D = 32: q[i][h] = (h+1) e_0, k0 = 1.5 e_0, k1 = -2 e_0; W_h = 0.25 (-1)^h; kv_scale 0.5.
  // key 0: s_h = 1.5 (h+1) > 0 -> logit = 0.5 * 0.25 * 1.5 * (1-2+3-4+5-6+7-8) = -0.75; M = 0.5*0.25*1.5*36 = 6.75
  // key 1: s_h < 0 -> relu 0 -> logit 0, M 0.
  std::mt19937_64 g(2);
  Case c = ragged(1, 8, 32, 2, g, {0}, {2}, true);
  auto* q = c.inputs["q"].data<std::uint8_t>();
  std::fill_n(q, 8 * 32, std::uint8_t{0});
  const std::uint8_t one_to_eight[8] = {0x38, 0x40, 0x44, 0x48, 0x4A, 0x4C, 0x4E, 0x50};  // 1..8
  for (int h = 0; h < 8; ++h) q[h * 32] = one_to_eight[h];
  auto* k = c.inputs["kv"].data<std::uint8_t>();
  std::fill_n(k, 64, std::uint8_t{0});
  k[0] = 0x3C;   // 1.5
  k[32] = 0xC0;  // -2
  for (int h = 0; h < 8; ++h) c.inputs["weights"].data<float>()[h] = h % 2 ? -0.25f : 0.25f;
  c.inputs["kv_scale"].data<float>()[0] = c.inputs["kv_scale"].data<float>()[1] = 0.5f;
  const Expected e = run(c);
  const RefTensor& rt = e.tensors[0];
  CHECK(rt.value.data<float>()[0] == -0.75f);
  CHECK(rt.magnitude.data<double>()[0] == 6.75);
  CHECK(rt.value.data<float>()[1] == 0.0f);
  CHECK(rt.magnitude.data<double>()[1] == 0.0);
  CHECK(rt.describe(1) == "row 0 key 1");
}

TEST_CASE("ref.logits.rounds_once_near_ties") {
  // s_h = 1 for heads 0..2; W = {1, 2^-24, +-2^-60}: exact sum 1 + 2^-24 +- 2^-60 lies just above / below the
  // fp32 midpoint 1 + 2^-24, so the correctly rounded value is 1 + 2^-23 / 1 (fp64 would see the tie -> 1).
  // H 32 / D 64: the AMX path's fused head sums and its exact fallback from the codes, where the CPU has AMX.
  for (auto [H, D] : {std::pair<i64, i64>{8, 32}, {32, 64}})
    for (int sign : {+1, -1, 0}) {
      std::mt19937_64 g(3);
      Case c = ragged(1, H, D, 1, g, {0}, {1}, true);
      auto* q = c.inputs["q"].data<std::uint8_t>();
      std::fill_n(q, H * D, std::uint8_t{0});
      for (i64 h = 0; h < 3; ++h) q[h * D] = 0x38;
      auto* k = c.inputs["kv"].data<std::uint8_t>();
      std::fill_n(k, D, std::uint8_t{0});
      k[0] = 0x38;
      float* w = c.inputs["weights"].data<float>();
      std::fill_n(w, H, 0.0f);
      w[0] = 1.0f;
      w[1] = std::ldexp(1.0f, -24);
      w[2] = static_cast<float>(sign) * std::ldexp(1.0f, -60);
      c.inputs["kv_scale"].data<float>()[0] = 1.0f;
      const Expected e = run(c);
      const std::uint32_t want = sign > 0 ? 0x3F800001u : 0x3F800000u;
      CHECK(num::f32_bits(e.tensors[0].value.data<float>()[0]) == want);
    }
}

TEST_CASE("ref.logits.ragged_random_masks_heads_dims_dtypes") {
  std::mt19937_64 g(4);
  for (i64 H : {32, 64})
    for (i64 D : {32, 64, 128})
      for (int mode = 0; mode < 4; ++mode) {  // 0 clean, 1 unclean, 2 compressed, 3 bf16 clean
        const i64 S = 5, N = 37;
        std::vector<std::int32_t> ks{0, 3, 10, 36, 20}, ke{37, 3, 25, 37, 21};  // row 1: ks == ke (empty)
        const i64 msk = mode == 2 ? 37 : 0;  // compressed: as wide as the widest row (ke - ks = 37)
        Case c = ragged(S, H, D, N, g, ks, ke, mode == 0 || mode == 3, msk, mode == 3 ? "bf16" : "float32");
        const Expected e = run(c);
        const RefTensor& rt = e.tensors[0];
        CHECK(rt.value.dim(1) == (msk ? msk : N));
        CHECK(rt.mask_must_match == (mode == 0 || mode == 3));
        CHECK(rt.value.dtype() == (mode == 3 ? DType::bf16 : DType::f32));
        check_ragged_truth(c, rt);
        if (mode == 2) CHECK(rt.describe(2 * 37 + 3) == "row 2 col 3 (key 13)");
      }
  // Narrower compressed logits than a row's [ks, ke) would make DeepGEMM write past the row: an input error.
  Case c = ragged(2, 32, 32, 37, g, {0, 3}, {37, 10}, false, 16);
  apply_attr_defaults(c);
  const auto p = validate_case(c);
  REQUIRE(p.size() == 1);
  CHECK(p[0].str() == "<memory>: case 't': attr max_seqlen_k: expected >= every row's ke - ks (row 0: 37), found 16");
}

TEST_CASE("ref.logits.threads_and_isa_paths_bit_identical") {
  std::mt19937_64 g(5);
  std::vector<std::int32_t> ks(40), ke(40);
  for (int i = 0; i < 40; ++i) ks[static_cast<std::size_t>(i)] = i * 3, ke[static_cast<std::size_t>(i)] = 200 + i * 2;
  Case c = ragged(40, 64, 128, 300, g, ks, ke, true);
  const Expected ref = run(c, 1);
  for (int th : {2, 16}) {
    const Expected e = run(c, th);
    CHECK(e.tensors[0].value.same_bytes(ref.tensors[0].value));
    CHECK(e.tensors[0].magnitude.same_bytes(ref.tensors[0].magnitude));
  }
  for (const char* isa : {"generic", "avx2", "avx512"}) {  // the default is amx where the CPU has it
    setenv("DSA_LOGITS_ISA", isa, 1);
    const Expected e = run(c, 2);
    unsetenv("DSA_LOGITS_ISA");
    CHECK(e.tensors[0].value.same_bytes(ref.tensors[0].value));
  }
  // the emulation too
  const Expected e1 = run(c, 1, true), e16 = run(c, 16, true);
  CHECK(e1.tensors[0].emulations.at("deepgemm-sm90").same_bytes(e16.tensors[0].emulations.at("deepgemm-sm90")));
}

TEST_CASE("ref.logits.nan_inf_inputs_propagate") {
  std::mt19937_64 g(6);
  Case c = ragged(3, 32, 64, 8, g, {0, 0, 0}, {8, 8, 8}, true);
  c.inputs["q"].data<std::uint8_t>()[5] = 0x7F;  // NaN in row 0 head 0
  c.inputs["weights"].data<float>()[1 * 32 + 3] = std::numeric_limits<float>::quiet_NaN();  // row 1
  c.inputs["kv_scale"].data<float>()[2] = std::numeric_limits<float>::infinity();           // key 2
  const Expected e = run(c, 0, true);
  const Tensor& v = e.tensors[0].value;
  for (i64 j = 0; j < 8; ++j) {
    CHECK(std::isnan(v.value(0 * 8 + j)));
    CHECK(std::isnan(v.value(1 * 8 + j)));
  }
  const double x = v.value(2 * 8 + 2);
  CHECK((std::isinf(x) || std::isnan(x)));
  CHECK(std::isfinite(v.value(2 * 8 + 3)));
  // NaN results are the CUDA-canonical NaN, and every ISA path / thread count gives the same bits.
  CHECK(v.bits(0) == 0x7FFFFFFFu);
  for (const char* isa : {"generic", "avx2", "avx512", "amx"}) {
    setenv("DSA_LOGITS_ISA", isa, 1);
    for (int th : {1, 2, 16}) CHECK(run(c, th).tensors[0].value.same_bytes(v));
    unsetenv("DSA_LOGITS_ISA");
  }
}

// The AMX path's int8 digit planes and tiles (engines/logits/logits_amx.cpp) against integer truth and the fp64 tiles.
TEST_CASE("ref.logits.amx_digit_planes_and_tiles_exact") {
  using namespace engines::logits;
  std::vector<std::uint8_t> codes(512);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>((i * 37) & 255);
  std::vector<std::int8_t> pg(5 * 512), pv(5 * 512);
  CHECK(amx_digit_planes_generic(codes.data(), 512, pg.data(), 512));  // NaN codes are among them
  CHECK(amx_digit_planes(codes.data(), 512, pv.data(), 512));
  CHECK(pg == pv);
  CHECK_FALSE(amx_digit_planes(codes.data(), 0, pv.data(), 512));
  for (std::size_t i = 0; i < 512; ++i) {
    const std::uint8_t c = codes[i];
    if ((c & 0x7F) == 0x7F) continue;
    const i64 x0 = pg[i], x1 = pg[512 + i], x2 = pg[1024 + i];
    CHECK(x0 + 64 * x1 + 4096 * x2 == code_x512(c));
    CHECK(pg[1536 + i] == x0 + x1 + x2);
    CHECK(pg[2048 + i] == x0 - x1 + x2);
  }
  if (!amx_available()) {
    MESSAGE("skipped: AMX tiles (this CPU or kernel has no AMX-INT8)");
    std::printf("skipped: AMX logits tiles (no AMX-INT8 here)\n");
    return;
  }
  setenv("DSA_LOGITS_ISA", "amx", 1);
  const Isa amx = pick_isa();
  setenv("DSA_LOGITS_ISA", "generic", 1);
  const Isa gen = pick_isa();
  unsetenv("DSA_LOGITS_ISA");
  REQUIRE(amx.amx);
  REQUIRE_FALSE(gen.amx);
  std::mt19937_64 g(11);
  const double* e4d = e4m3_f64_table();
  for (int D : {64, 128})
    for (int nk : {1, 70, 128}) {
      const int nc = 160;  // 2.5 q rows of 64 heads: padded columns
      std::vector<std::uint8_t> q(static_cast<std::size_t>(nc * D)), k(static_cast<std::size_t>(nk * D));
      for (int c = 0; c < nc; ++c)
        for (int d = 0; d < D; ++d)  // extreme rows: every dim +-448 (largest digit sums), else random
          q[static_cast<std::size_t>(c * D + d)] = c < 2 ? (c == 0 ? 0x7E : 0xFE) : rand_code(g);
      for (int j = 0; j < nk; ++j)
        for (int d = 0; d < D; ++d) k[static_cast<std::size_t>(j * D + d)] = j < 2 ? (j == 0 ? 0x7E : (d % 2 ? 0xFE : 0x01)) : rand_code(g);
      for (int with_nan : {0, 1}) {
        if (with_nan) k[static_cast<std::size_t>((nk / 2) * D + 3)] = 0x7F;  // the tile takes the fp64 path
        Tile ta, tg;
        ta.shape(amx, 128, nc, D);
        tg.shape(gen, 128, nc, D);
        CHECK(ta.amx);
        ta.load_q(q.data(), nc, e4d);
        tg.load_q(q.data(), nc, e4d);
        std::copy(k.begin(), k.end(), ta.key_row(0));
        std::copy(k.begin(), k.end(), tg.key_row(0));
        ta.compute(amx, nk, e4d);
        tg.compute(gen, nk, e4d);
        i64 bad = 0, bad_vs_fp64 = 0;
        for (int j = 0; j < nk; ++j)
          for (int c = 0; c < nc; ++c) {
            const double got = *ta.c_at(j, c);
            std::uint64_t a, b;
            const double fp = *tg.c_at(j, c);
            std::memcpy(&a, &got, 8);
            std::memcpy(&b, &fp, 8);
            bad_vs_fp64 += a != b && !(std::isnan(got) && std::isnan(fp));
            if (with_nan && j == nk / 2) {
              bad += !std::isnan(got);
              continue;
            }
            const i64 s = dot_units(q.data() + c * D, k.data() + j * D, D);
            bad += got != static_cast<double>(s) / 262144.0;
          }
        CHECK(bad == 0);
        CHECK(bad_vs_fp64 == 0);
      }
    }
}

namespace {
// Paged case: request b has logical keys; pages assigned by a shuffled block table.
Case paged(i64 B, i64 NN, i64 H, i64 D, const std::vector<std::int32_t>& lens, bool two_d, bool clean, std::mt19937_64& g,
           i64 max_ctx, i64 MB) {
  const i64 ps = 64, P = B * MB + 3;
  Case c;
  c.name = "p";
  c.stage = "indexer.logits_paged";
  c.inputs["q"] = codes({B, NN, H, D}, g);
  Tensor cache(DType::u8, {P, ps, 1, D + 4});
  for (i64 p = 0; p < P; ++p)
    for (i64 t = 0; t < ps; ++t) {
      for (i64 d = 0; d < D; ++d) cache.data<std::uint8_t>()[p * ps * (D + 4) + t * D + d] = rand_code(g);
      const float s = std::ldexp(1.0f + static_cast<float>(g() % 128) / 128.0f, -8);
      std::memcpy(cache.data<std::uint8_t>() + p * ps * (D + 4) + ps * D + 4 * t, &s, 4);
    }
  c.inputs["kv_cache"] = cache;
  c.inputs["weights"] = weights({B * NN, H}, g);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(P));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), g);
  std::vector<std::int32_t> bt(static_cast<std::size_t>(B * MB));
  for (std::size_t i = 0; i < bt.size(); ++i) bt[i] = pages[i];
  c.inputs["block_table"] = i32(bt, {B, MB});
  c.inputs["context_lens"] = two_d ? i32(lens, {B, NN}) : i32(lens, {B});
  c.attrs["clean_logits"] = i64{clean ? 1 : 0};
  c.attrs["max_context_len"] = max_ctx;
  return c;
}
}  // namespace

TEST_CASE("ref.logits.paged_next_n_context_lens_block_tables") {
  std::mt19937_64 g(7);
  for (i64 NN : {1, 2, 4})
    for (int variant = 0; variant < 3; ++variant) {  // 0: 1-D unclean, 1: 1-D clean, 2: 2-D
      const i64 B = 3, H = variant == 2 ? 32 : 64, D = 128, MB = 4, maxc = 200;
      std::vector<std::int32_t> lens;
      if (variant < 2) lens = {static_cast<std::int32_t>(130), static_cast<std::int32_t>(NN), 200};
      else
        for (i64 b = 0; b < B; ++b)
          for (i64 t = 0; t < NN; ++t) lens.push_back(static_cast<std::int32_t>(b == 1 ? t : 60 + 40 * b + 7 * t));
      Case c = paged(B, NN, H, D, lens, variant == 2, variant == 1, g, maxc, MB);
      const Expected e = run(c);
      const RefTensor& rt = e.tensors[0];
      const i64 cols = maxc;
      const auto* bt = c.input("block_table").data<std::int32_t>();
      const auto* cache = c.input("kv_cache").data<std::uint8_t>();
      i64 bad = 0, checked = 0;
      for (i64 b = 0; b < B; ++b)
        for (i64 t = 0; t < NN; ++t) {
          const i64 r = b * NN + t;
          const i64 n = variant == 2 ? lens[static_cast<std::size_t>(r)] : lens[static_cast<std::size_t>(b)] - NN + t + 1;
          for (i64 j = 0; j < cols; ++j) {
            const i64 f = r * cols + j;
            const bool valid = j < n, def = rt.defined.data<std::uint8_t>()[f] != 0;
            if (variant == 1) {
              bad += !def;
              if (!valid) bad += !(std::isinf(rt.value.value(f)) && rt.value.value(f) < 0);
            } else {
              bad += def != valid;
            }
            if (!valid) continue;
            const i64 page = bt[b * MB + j / 64], slot = j % 64;
            const std::uint8_t* krow = cache + page * 64 * (D + 4) + slot * D;
            float sc;
            std::memcpy(&sc, cache + page * 64 * (D + 4) + 64 * D + 4 * slot, 4);
            const Truth tr = truth(c.input("q").data<std::uint8_t>() + r * H * D, krow, c.input("weights").data<float>() + r * H, sc, H, D);
            bad += rt.value.bits(f) != num::f32_bits(tr.f32);
            ++checked;
          }
        }
      CHECK(checked > 0);
      CHECK(bad == 0);
      const i64 f = 2 * NN * cols + 130;  // batch 2, next_n 0, key 130 -> block 2
      CHECK(rt.describe(f) == "batch 2 next_n 0 key 130 (page " + std::to_string(bt[2 * MB + 2]) + " slot 2)");
    }
}

// ---- CUDA backend: the same bytes as the CPU (value, M, defined, emulation), skipped visibly without a device ----
namespace {
bool cuda_skip(const char* what) {
  const std::string why = cuda::device_problem();
  if (why.empty()) return false;
  MESSAGE("skipped: " << why);
  std::printf("skipped: %s (%s)\n", what, why.c_str());
  return true;
}
// CPU and CUDA references of c (rows [r0, r1) when r1 >= 0) are byte-identical; returns the CPU one.
Expected same_on_gpu(Case& c, bool emu = false, i64 r0 = 0, i64 r1 = -1) {
  apply_attr_defaults(c);
  REQUIRE(validate_case(c, false).empty());
  RefOptions o;
  if (emu) o.emulation = find_profile("deepgemm-sm90");
  o.row_begin = r0;
  o.row_end = r1;
  const Expected a = run_reference(c, o, Backend::cpu), b = run_reference(c, o, Backend::cuda);
  const RefTensor &x = a.tensors.at(0), &y = b.tensors.at(0);
  CHECK(x.value.same_bytes(y.value));
  CHECK(x.magnitude.same_bytes(y.magnitude));
  CHECK(x.defined.same_bytes(y.defined));
  CHECK(x.flat_offset == y.flat_offset);
  CHECK(x.emulations.size() == y.emulations.size());
  for (const auto& [k, t] : x.emulations) CHECK(t.same_bytes(y.emulations.at(k)));
  if (x.value.numel() > 0) CHECK(x.describe(x.value.numel() - 1) == y.describe(x.value.numel() - 1));
  return a;
}
}  // namespace

TEST_CASE("cuda.logits.ragged_heads_dims_masks_nonfinite_identical_to_cpu") {
  if (cuda_skip("CPU vs CUDA ragged logits")) return;
  std::mt19937_64 g(11);
  int n = 0;
  for (i64 H : {8, 16, 24, 32, 64, 128, 136})  // 16 / 32 / 64 at D 128: the wgmma engine's four-warpgroup kernel
    for (i64 D : {32, 64, 128})
      for (int mode = 0; mode < 4; ++mode) {  // 0 clean, 1 unclean, 2 compressed, 3 bf16 clean
        const i64 S = 6, N = H == 64 && D == 128 ? 1200 : 150;  // 1200: several 512-key chunks per row group
        std::vector<std::int32_t> ks{0, 3, 10, static_cast<std::int32_t>(N - 1), 20, 0},
            ke{static_cast<std::int32_t>(N), 3, 125, static_cast<std::int32_t>(N), 21, static_cast<std::int32_t>(N - 7)};
        const i64 msk = mode == 2 ? N : 0;
        Case c = ragged(S, H, D, N, g, ks, ke, mode == 0 || mode == 3, msk, mode == 3 ? "bf16" : "float32");
        auto* q = c.inputs["q"].data<std::uint8_t>();
        auto* k = c.inputs["kv"].data<std::uint8_t>();
        float* w = c.inputs["weights"].data<float>();
        float* sc = c.inputs["kv_scale"].data<float>();
        q[(2 * H + 1) * D + 5] = 0x7F;  // NaN code in row 2 head 1
        k[40 * D + 3] = 0xFF;           // NaN code in key 40
        w[5 * H + 2] = std::numeric_limits<float>::infinity();
        sc[50] = std::numeric_limits<float>::quiet_NaN();
        sc[51] = 0.0f;
        sc[52] = -std::numeric_limits<float>::infinity();
        sc[53] = -1.5f;
        same_on_gpu(c, mode != 2 && H == 64);
        ++n;
      }
  CHECK(n == 84);
}

TEST_CASE("cuda.logits.two_warpgroup_kernel_identical_to_cpu_and_bad_setting_refused") {
  if (cuda_skip("CPU vs CUDA, DSA_WGMMA_WARPGROUPS")) return;
  std::mt19937_64 g(12);
  for (i64 H : {16, 32, 64}) {  // N 128: the four-warpgroup kernel by default, the two-warpgroup one when asked
    Case c = ragged(6, H, 128, 900, g, {0, 3, 10, 899, 20, 0}, {900, 3, 125, 900, 21, 893}, true, 0, "float32");
    c.inputs["kv"].data<std::uint8_t>()[40 * 128 + 3] = 0xFF;  // a NaN code in key 40
    setenv("DSA_WGMMA_WARPGROUPS", "2", 1);
    same_on_gpu(c, H == 64);
    setenv("DSA_WGMMA_WARPGROUPS", "4", 1);
    same_on_gpu(c, false);
  }
  Case c = ragged(2, 64, 128, 200, g, {0, 0}, {200, 150}, true, 0, "float32");
  for (const char* bad : {"3", "", "four", "2 "}) {
    setenv("DSA_WGMMA_WARPGROUPS", bad, 1);
    CHECK_THROWS_WITH_AS(run_reference(c, RefOptions{}, Backend::cuda), doctest::Contains("DSA_WGMMA_WARPGROUPS"), std::exception);
  }
  unsetenv("DSA_WGMMA_WARPGROUPS");
}

TEST_CASE("cuda.logits.certificate_failures_rounded_exactly") {
  if (cuda_skip("CPU vs CUDA exact fallback")) return;
  // Every logit sits within 2^-60 of an fp32 (bf16) rounding boundary: the device certificate fails for all of
  // them and the host rounds the exact value (first principles as in ref.logits.rounds_once_near_ties).
  for (const char* dt : {"float32", "bf16"}) {
    std::mt19937_64 g(5);
    const i64 S = 3, H = 8, D = 32, N = 300;
    Case c = ragged(S, H, D, N, g, {0, 0, 0}, {300, 300, 300}, true, 0, dt);
    auto* q = c.inputs["q"].data<std::uint8_t>();
    std::fill_n(q, S * H * D, std::uint8_t{0});
    for (i64 i = 0; i < S; ++i)
      for (int h = 0; h < 3; ++h) q[(i * H + h) * D] = 0x38;  // 1.0
    auto* k = c.inputs["kv"].data<std::uint8_t>();
    std::fill_n(k, N * D, std::uint8_t{0});
    for (i64 j = 0; j < N; ++j) k[j * D] = 0x38;
    const bool bf = std::string(dt) == "bf16";
    float* w = c.inputs["weights"].data<float>();
    std::fill_n(w, S * H, 0.0f);
    for (i64 i = 0; i < S; ++i) {
      w[i * H] = 1.0f;
      w[i * H + 1] = std::ldexp(1.0f, bf ? -8 : -24);  // the midpoint 1 + ulp/2
      w[i * H + 2] = static_cast<float>(static_cast<int>(i) - 1) * std::ldexp(1.0f, -60);
    }
    std::fill_n(c.inputs["kv_scale"].data<float>(), N, 1.0f);
    const Expected e = same_on_gpu(c);
    for (i64 i = 0; i < S; ++i) {
      const std::uint32_t want = i == 2 ? (bf ? 0x3F81u : 0x3F800001u) : (bf ? 0x3F80u : 0x3F800000u);
      for (i64 j = 0; j < N; j += 37) CHECK(e.tensors[0].value.bits(i * N + j) == want);
    }
  }
}

TEST_CASE("cuda.logits.paged_and_row_tiles_identical_to_cpu") {
  if (cuda_skip("CPU vs CUDA paged logits")) return;
  std::mt19937_64 g(9);
  for (i64 NN : {1, 2, 4})
    for (int variant = 0; variant < 3; ++variant) {  // 0: 1-D unclean, 1: 1-D clean, 2: 2-D
      const i64 B = 3, H = variant == 2 ? 32 : 64, D = 128, MB = 12, maxc = 700;
      std::vector<std::int32_t> lens;
      if (variant < 2) lens = {static_cast<std::int32_t>(630), static_cast<std::int32_t>(NN), 700};
      else
        for (i64 b = 0; b < B; ++b)
          for (i64 t = 0; t < NN; ++t) lens.push_back(static_cast<std::int32_t>((b * 211 + t * 7) % 700));
      Case c = paged(B, NN, H, D, lens, variant == 2, variant == 1, g, maxc, MB);
      c.inputs["kv_cache"].data<std::uint8_t>()[5] = 0x7F;  // a NaN code in page 0
      same_on_gpu(c, true);
      same_on_gpu(c, false, NN, 3 * NN);  // a row tile of whole requests
    }
  std::mt19937_64 g2(10);
  Case r = ragged(9, 64, 128, 400, g2, {0, 0, 5, 9, 0, 100, 0, 0, 0}, {400, 1, 300, 9, 399, 400, 64, 65, 200}, true);
  same_on_gpu(r, false, 2, 7);
}
