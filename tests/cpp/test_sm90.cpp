// deepgemm-sm90 emulation: hand-checked model cases and the acceptance test on real DeepGEMM H200 output
// (../shared/data, sm90_fp8_wgmma.md). Test names: sm90.*
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/deepgemm_import.hpp"
#include "numerics/formats.hpp"
#include "profiles/deepgemm_sm90/sm90.hpp"
#include "stage/stage.hpp"

using namespace dsa;

namespace {
std::string shared_dir() {
  const char* e = std::getenv("DSA_SHARED_DIR");
  return e && *e ? std::string(e) : std::string(DSA_SHARED_DIR);
}
// Returns the path, or "" after reporting that it is absent (a failure only when DSA_REQUIRE_SHARED=1).
std::string shared_file(const std::string& rel) {
  const std::string p = shared_dir() + "/" + rel;
  if (std::filesystem::exists(p)) return p;
  const char* req = std::getenv("DSA_REQUIRE_SHARED");
  if (req && std::string(req) == "1") FAIL("shared data file missing: " << p << " (DSA_REQUIRE_SHARED=1)");
  MESSAGE("SKIPPED: shared data file missing: " << p << " (set DSA_REQUIRE_SHARED=1 to make this a failure)");
  return "";
}
std::uint8_t neg(std::uint8_t c) { return static_cast<std::uint8_t>(c ^ 0x80); }

// Rows [0, S) step `step` of a ragged case (unoptimised sanitizer builds only: the emulation at -O0 under
// ASan is ~50x slower; the release build compares every logit).
Tensor rows_of(const Tensor& t, std::int64_t step) {
  Shape sh = t.shape();
  const std::int64_t S = sh[0], row = t.numel() / std::max<std::int64_t>(S, 1);
  sh[0] = (S + step - 1) / step;
  Tensor o(t.dtype(), sh);
  const std::size_t rb = static_cast<std::size_t>(row) * dtype_size(t.dtype());
  for (std::int64_t i = 0; i < sh[0]; ++i) std::memcpy(o.raw() + static_cast<std::size_t>(i) * rb, t.raw() + static_cast<std::size_t>(i * step) * rb, rb);
  return o;
}
void subsample_ragged(Case& c, std::int64_t step) {
  for (const char* n : {"q", "weights", "ks", "ke"}) c.inputs[n] = rows_of(c.inputs.at(n), step);
  c.outputs["logits"] = rows_of(c.outputs.at("logits"), step);
}
#ifdef NDEBUG
constexpr std::int64_t kRowStep = 1;
#else
constexpr std::int64_t kRowStep = 8;
#endif
}  // namespace

TEST_CASE("sm90.dot_hand_checked_truncations") {
  // chunk of 32: p1 = 1.875*1.875 = 3.515625 (e = 0, 28800 units of 2^-13),
  //              p2 = 1.125*2^-1 * 1.125*2^-6 = 81 * 2^-13 (kept whole),
  //              p3 = 2^-9 * 2^-9 = 2^-18 (subnormals, counted exponent -12): below the unit 2^-13 -> dropped.
  // t = 28881 units; E(t) = 14 -> 14 significant bits = a multiple of 2 units -> 28880 -> s = 3.525390625,
  // while the exact sum is 3.5255126953125 + 2^-18.
  std::uint8_t a[32] = {}, b[32] = {};
  a[0] = b[0] = 0x3F;  // 1.875
  a[1] = 0x31;         // 1.125 * 2^-1
  b[1] = 0x09;         // 1.125 * 2^-6
  a[2] = b[2] = 0x01;  // 2^-9 (subnormal)
  CHECK(num::e4m3_to_f32(0x3F) == 1.875f);
  CHECK(num::e4m3_to_f32(0x31) == 0.5625f);
  CHECK(num::e4m3_to_f32(0x09) == 1.125f / 64);
  CHECK(num::e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));
  CHECK(profiles::sm90::wgmma_dot_codes(a, b, 32) == 3.525390625f);
  // symmetric truncation toward zero
  for (int i = 0; i < 3; ++i) a[i] = neg(a[i]);
  CHECK(profiles::sm90::wgmma_dot_codes(a, b, 32) == -3.525390625f);

  // Accumulator alignment across chunks: chunk 0 gives 448*448 = 200704 (E = 17), chunk 1 adds 1*1.125:
  // e = 17, unit 2^4 -> 1.125 truncates to 0. A 64-element dot.
  std::uint8_t x[64] = {}, y[64] = {};
  x[0] = y[0] = 0x7E;  // 448
  x[40] = 0x38;        // 1.0
  y[40] = 0x39;        // 1.125
  CHECK(profiles::sm90::wgmma_dot_codes(x, y, 64) == 200704.0f);
  // The same two products in one chunk: e = 16 (448 = 1.75*2^8), unit 2^3 -> the 1.125 still vanishes.
  x[1] = 0x38, y[1] = 0x39, x[40] = y[40] = 0;
  CHECK(profiles::sm90::wgmma_dot_codes(x, y, 64) == 200704.0f);
  // all zero / zero factors: 0
  std::uint8_t z[32] = {};
  CHECK(profiles::sm90::wgmma_dot_codes(z, a, 32) == 0.0f);
  // NaN code propagates
  z[5] = 0x7F;
  CHECK(std::isnan(profiles::sm90::wgmma_dot_codes(z, a, 32)));
}

TEST_CASE("sm90.head_reduce_fma_contraction_and_order") {
  // H = 16: chain A of lane 0 = heads {0, 8}: acc = fma(r0, w0, fl32(r8*w8)).
  // r0 = w0 = 1 + 2^-12 -> r0*w0 = 1 + 2^-11 + 2^-24 exactly; with r8*w8 = -1 the fma keeps 2^-11 + 2^-24
  // (a separate fp32 multiply would round to 1 + 2^-11 and give 2^-11).
  float s[16] = {}, w[16] = {};
  s[0] = w[0] = 1.0f + std::ldexp(1.0f, -12);
  s[8] = 1.0f;
  w[8] = -1.0f;
  CHECK(profiles::sm90::head_reduce(s, w, 16, 1.0f) == std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  // relu: negative s contributes nothing; CUDA fmaxf(NaN, 0) = 0
  s[3] = -5.0f;
  w[3] = 1.0f;
  s[5] = std::nanf("");
  w[5] = 1.0f;
  CHECK(profiles::sm90::head_reduce(s, w, 16, 1.0f) == std::ldexp(1.0f, -11) + std::ldexp(1.0f, -24));
  // kv scale applied per lane before the cross-lane sum: P_c = fl32(fl32(A+B)*sc), logit = (P0+P1)+(P2+P3).
  float s2[8] = {1, 1, 1, 1, 1, 1, 1, 1}, w2[8] = {1.0f, std::ldexp(1.0f, -24), 0, 0, 0, 0, 0, 0};
  // lane 0: A = 1, B = 2^-24 -> fl32(1 + 2^-24) = 1 (tie to even); * 3 = 3.
  CHECK(profiles::sm90::head_reduce(s2, w2, 8, 3.0f) == 3.0f);
}

TEST_CASE("sm90.probe_dot_products_bit_exact") {
  const std::string path = shared_file("data/sm90_fp8_wgmma_probe.h5");
  if (path.empty()) return;
  const io::Sm90Probe p = io::read_sm90_probe(path);
  const std::int64_t Q = p.q_rows.dim(0), K = p.k.dim(0), D = p.k.dim(1);
  const profiles::sm90::Fp8Op* tab = profiles::sm90::fp8_table();
  std::vector<profiles::sm90::Fp8Op> qo(static_cast<std::size_t>(Q * D)), qn(qo.size()), ko(static_cast<std::size_t>(K * D));
  for (std::int64_t i = 0; i < Q * D; ++i) {
    qo[static_cast<std::size_t>(i)] = tab[p.q_rows.data<std::uint8_t>()[i]];
    qn[static_cast<std::size_t>(i)] = tab[neg(p.q_rows.data<std::uint8_t>()[i])];
  }
  for (std::int64_t i = 0; i < K * D; ++i) ko[static_cast<std::size_t>(i)] = tab[p.k.data<std::uint8_t>()[i]];
  std::int64_t bad = 0, total = 0, nonzero = 0, first_bad = -1;
  const float* L = p.logits.data<float>();
  for (std::int64_t i = 0; i < Q; ++i)
    for (std::int64_t j = 0; j < K; ++j)
      for (int sgn = 0; sgn < 2; ++sgn) {
        const float s = profiles::sm90::wgmma_dot((sgn ? qn : qo).data() + i * D, ko.data() + j * D, static_cast<int>(D));
        const float want = L[(2 * i + sgn) * K + j];
        const float got = std::fmax(s, 0.0f);
        ++total;
        nonzero += want != 0.0f;
        if (num::f32_bits(got) != num::f32_bits(want)) {
          if (first_bad < 0) first_bad = (2 * i + sgn) * K + j;
          ++bad;
        }
      }
  INFO("first mismatch at flat " << first_bad);
  CHECK(total == 2 * Q * K);
  CHECK(nonzero > total / 3);  // both signs of every dot product are exercised
  CHECK(bad == 0);
}

TEST_CASE("sm90.deepgemm_logits_bit_exact_all_groups") {
  const std::string path = shared_file("data/deepgemm_sm90_logits.h5");
  if (path.empty()) return;
  std::vector<Case> cases = io::import_deepgemm_sm90_logits(path);
  CHECK(cases.size() == 8);  // 3 ragged x {fp32, bf16} + 2 paged
  RefOptions opt;
  opt.emulation = find_profile("deepgemm-sm90");
  std::int64_t compared_total = 0;
  if (kRowStep > 1) MESSAGE("unoptimised build: ragged cases compared on every " << kRowStep << "th row only (release: all)");
  for (Case& c : cases) {
    if (kRowStep > 1 && c.stage == "indexer.logits_ragged") subsample_ragged(c, kRowStep);
    apply_attr_defaults(c);
    const auto probs = validate_case(c);
    for (const auto& pr : probs) MESSAGE(pr.str());
    REQUIRE(probs.empty());
    const Stage* st = find_stage(c.stage);
    REQUIRE(st != nullptr);
    const Expected e = run_reference(c, opt);
    const RefTensor* rt = e.find("logits");
    REQUIRE(rt != nullptr);
    REQUIRE(rt->emulations.count("deepgemm-sm90") == 1);
    const Tensor& emu = rt->emulations.at("deepgemm-sm90");
    const Tensor& out = c.outputs.at("logits");
    REQUIRE(emu.shape() == out.shape());
    REQUIRE(emu.dtype() == out.dtype());
    const bool clean = c.attr_bool("clean_logits");
    std::int64_t compared = 0, bad = 0, far = 0, first_bad = -1;
    double worst = 0;
    for (std::int64_t f = 0; f < out.numel(); ++f) {
      if (!rt->defined.data<std::uint8_t>()[f]) continue;
      ++compared;
      if (emu.bits(f) != out.bits(f)) {
        if (first_bad < 0) first_bad = f;
        ++bad;
      }
      // the exact reference against the real kernel: within the measured WGMMA deviation (2.4e-4 of M),
      // plus the bf16 output rounding
      const double ref = rt->value.value(f), got = out.value(f), M = rt->magnitude.data<double>()[f];
      if (std::isinf(ref) || std::isinf(got)) {
        far += !(ref == got);
        continue;
      }
      const double tol = 4e-4 * M + (out.dtype() == DType::bf16 ? std::ldexp(std::max(std::fabs(ref), std::fabs(got)), -7) : 0.0);
      if (std::fabs(ref - got) > tol) ++far;
      if (M > 0) worst = std::max(worst, std::fabs(ref - got) / M);
    }
    INFO(c.name << ": first emulation mismatch " << (first_bad >= 0 ? rt->describe(first_bad) : std::string("none")));
    MESSAGE(c.name << ": " << compared << " logits compared, emulation mismatches " << bad
                   << ", max |exact - kernel| / M = " << worst);
    CHECK(compared > 0);
    if (clean) CHECK(compared == out.numel());
    CHECK(bad == 0);
    CHECK(far == 0);
    compared_total += compared;
  }
  CHECK(compared_total > 100000 / kRowStep);
}
