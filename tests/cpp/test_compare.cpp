// Unit tests of the bytes / bounded comparators, tolerance resolution and report writers. Expected metric values
// are computed by hand in the comments from the literal inputs.
#include <doctest/doctest.h>

#include "io/text_file.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <unistd.h>

#include "compare/compare.hpp"
#include "report/json.hpp"
#include "report/junit.hpp"
#include "pipeline/check.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"

using namespace dsa;
using namespace dsa::cmp;
using pipeline::CheckOptions;
using pipeline::compare_tensor;
using pipeline::parse_tol_override;
using pipeline::requested_emulation;
using pipeline::sanity_findings;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor f32(const std::vector<float>& v) { return Tensor::from_vector(DType::f32, {static_cast<std::int64_t>(v.size())}, v); }
RefTensor bounded_ref(const std::vector<float>& v) {
  RefTensor r;
  r.name = "logits";
  r.kind = CompareKind::bounded;
  r.value = f32(v);
  return r;
}
Case logits_case(const std::string& dtype = "") {
  Case c;
  c.name = "c";
  c.stage = "indexer.logits_ragged";
  if (!dtype.empty()) c.attrs["logits_dtype"] = dtype;
  return c;
}
// The case bound to its stage as validate_case would (Params as parse gives them for its logits_dtype attr).
BoundCase bind(const Case& c) {
  auto p = std::make_shared<indexer::logits_ragged::Params>();
  p->bf16 = c.has_attr("logits_dtype") && c.attr_str("logits_dtype") == "bf16";
  return {&c, find_stage(c.stage), p, kernel_profile(c)};
}
Tolerance resolve(const Case& c, const std::string& tensor, const CheckOptions& o) { return resolve_tolerance(bind(c), tensor, o.tol); }
}  // namespace

TEST_CASE("compare_bounded: hand-computed metrics") {
  // out = [1, 2.5, -3, 0], ref = [1, 2, -3, 0], M = |ref|: the only error is 0.5 at element 1 (rel 0.25).
  const RefTensor ref = bounded_ref({1.0f, 2.0f, -3.0f, 0.0f});
  const Tensor out = f32({1.0f, 2.5f, -3.0f, 0.0f});
  const CheckResult r = compare_bounded(out, ref, Tolerance{"t", 0.3, 0.0});
  CHECK(r.verdict == Verdict::WITHIN_BOUND);
  REQUIRE(r.bounded);
  const BoundedStats& s = *r.bounded;
  CHECK(s.compared == 4);
  CHECK(s.max_abs == 0.5);
  CHECK(s.max_rel == 0.25);
  CHECK(s.max_err_over_m == 0.25);
  CHECK(s.min_rtol == 0.25);
  CHECK(s.max_ulp == 2097152.0);  // fp32 ulp at 2.0 is 2^-22: 0.5 / 2^-22 = 2^21
  CHECK(s.ulp_compared == 3);      // ref 0 lies below its bound (0.3 * 0): no ulp is counted there
  // A near-zero reference (cancellation) inside the bound of its magnitude M does not inflate max ulp.
  RefTensor nz = bounded_ref({1e-30f, 1.0f});
  nz.magnitude = Tensor::from_vector(DType::f64, {2}, std::vector<double>{1.0, 1.0});
  const CheckResult rz = compare_bounded(f32({1e-3f, 1.0f}), nz, Tolerance{"t", 0.01, 0.0});
  CHECK(rz.verdict == Verdict::WITHIN_BOUND);
  CHECK(rz.bounded->max_ulp == 0.0);
  CHECK(rz.bounded->ulp_compared == 1);
  // sum xy = 1 + 5 + 9 = 15; sum x^2 = 16.25; sum y^2 = 14.
  CHECK(s.cosine == doctest::Approx(15.0 / std::sqrt(16.25 * 14.0)).epsilon(1e-15));
  CHECK(s.calc_diff == doctest::Approx(1.0 - 30.0 / 30.25).epsilon(1e-15));
  CHECK(s.ratio_rel_1e3 == 0.75);  // 3 of 4 elements have rel err 0
  CHECK(s.ratio_rel_5e3 == 0.75);

  const CheckResult f = compare_bounded(out, ref, Tolerance{"t", 0.2, 0.0});  // bound 0.4 < 0.5
  CHECK(f.verdict == Verdict::FAIL);
  CHECK(f.mismatches == 1);
  REQUIRE(f.first);
  CHECK(f.first->flat == 1);
  CHECK(f.worst->flat == 1);
  CHECK(f.first->err == 0.5);
  CHECK(f.first->bound == doctest::Approx(0.4));

  const CheckResult a = compare_bounded(out, ref, Tolerance{"t", 0.0, 0.5});  // atol alone covers it
  CHECK(a.verdict == Verdict::WITHIN_BOUND);
  CHECK(a.bounded->min_rtol == 0.0);
}

TEST_CASE("compare_bounded: bit-exact, zero vectors, magnitude, defined mask, bf16 ulps") {
  const RefTensor z = bounded_ref({0.0f, 0.0f});
  const CheckResult r0 = compare_bounded(f32({0.0f, 0.0f}), z, Tolerance{"", 0.0, 0.0});
  CHECK(r0.verdict == Verdict::BITEXACT);
  CHECK(r0.bounded->calc_diff == 0.0);  // DeepGEMM: 0 when the denominator is 0
  CHECK(r0.bounded->cosine == 1.0);

  RefTensor m = bounded_ref({0.0f, 4.0f});
  m.magnitude = Tensor::from_vector(DType::f64, {2}, std::vector<double>{10.0, 4.0});
  // element 0: err 0.05 <= 0.01 * 10; element 1: err 0.03 <= 0.04.
  CHECK(compare_bounded(f32({0.05f, 4.03f}), m, Tolerance{"", 0.01, 0.0}).verdict == Verdict::WITHIN_BOUND);
  CHECK(compare_bounded(f32({0.2f, 4.0f}), m, Tolerance{"", 0.01, 0.0}).verdict == Verdict::FAIL);

  RefTensor d = bounded_ref({1.0f, 2.0f});
  d.defined = Tensor::from_vector(DType::u8, {2}, std::vector<std::uint8_t>{1, 0});
  const CheckResult rd = compare_bounded(f32({1.0f, std::numeric_limits<float>::quiet_NaN()}), d, Tolerance{});
  CHECK(rd.verdict == Verdict::BITEXACT);  // the undefined element is ignored, even NaN

  RefTensor b;
  b.name = "logits";
  b.kind = CompareKind::bounded;
  b.value = Tensor::from_vector(DType::bf16, {1}, std::vector<std::uint16_t>{0x3F80});  // 1.0
  const Tensor ob = Tensor::from_vector(DType::bf16, {1}, std::vector<std::uint16_t>{0x3F81});  // 1 + 2^-7
  const CheckResult rb = compare_bounded(ob, b, Tolerance{"", 0.01, 0.0});
  CHECK(rb.bounded->ulp_bits == 8);
  CHECK(rb.bounded->max_ulp == 1.0);
}

TEST_CASE("compare_bounded: non-finite and -inf mask rules") {
  const RefTensor r = bounded_ref({1.0f, 2.0f});
  CHECK(compare_bounded(f32({1.0f, static_cast<float>(kNaN)}), r, Tolerance{"", 1, 0}).verdict == Verdict::NONFINITE);
  CHECK(compare_bounded(f32({1.0f, static_cast<float>(kInf)}), r, Tolerance{"", 1, 0}).verdict == Verdict::NONFINITE);
  const RefTensor rn = bounded_ref({static_cast<float>(kNaN), static_cast<float>(-kInf)});
  CHECK(compare_bounded(f32({static_cast<float>(kNaN), static_cast<float>(-kInf)}), rn, Tolerance{}).verdict == Verdict::BITEXACT);
  CHECK(compare_bounded(f32({static_cast<float>(kNaN), 0.0f}), rn, Tolerance{}).verdict == Verdict::NONFINITE);

  RefTensor mk = bounded_ref({static_cast<float>(-kInf), 2.0f});
  mk.mask_must_match = true;
  const CheckResult a = compare_bounded(f32({0.5f, 2.0f}), mk, Tolerance{"", 1, 0});  // finite where masked
  CHECK(a.verdict == Verdict::MASK_MISMATCH);
  CHECK(a.first->flat == 0);
  CHECK(compare_bounded(f32({static_cast<float>(-kInf), static_cast<float>(-kInf)}), mk, Tolerance{"", 1, 0}).verdict ==
        Verdict::MASK_MISMATCH);  // masked where the reference is finite
  // NaN beats a mask problem: NONFINITE.
  CHECK(compare_bounded(f32({static_cast<float>(kNaN), 2.0f}), mk, Tolerance{"", 1, 0}).verdict == Verdict::NONFINITE);
}

TEST_CASE("compare_bytes: counts, first and worst, layout meaning") {
  RefTensor r;
  r.name = "scale";
  r.value = f32({1.0f, 2.0f, 4.0f, 8.0f});
  r.describe = [](std::int64_t f) { return "token " + std::to_string(f); };
  CHECK(compare_bytes(f32({1.0f, 2.0f, 4.0f, 8.0f}), r).verdict == Verdict::BITEXACT);
  const CheckResult x = compare_bytes(f32({1.0f, 2.5f, 4.0f, 0.0f}), r);
  CHECK(x.verdict == Verdict::FAIL);
  CHECK(x.mismatches == 2);
  CHECK(x.first->flat == 1);
  CHECK(x.worst->flat == 3);  // |0 - 8| > |2.5 - 2|
  CHECK(x.message.find("token 3") != std::string::npos);
  CHECK(compare_bytes(f32({1.0f, 2.0f, static_cast<float>(kNaN), 8.0f}), r).verdict == Verdict::NONFINITE);
}

TEST_CASE("compare_bytes: accepted candidate patterns are per element and only those") {
  RefTensor r;
  r.name = "codes";
  r.value = f32({1.0f, 2.0f, 4.0f});
  r.describe = [](std::int64_t f) { return "byte " + std::to_string(f); };
  auto cand = std::make_shared<std::map<std::int64_t, std::vector<std::uint64_t>>>();
  (*cand)[1] = {0x40100000u};  // 2.25f accepted at element 1 only
  r.candidates = cand;
  const CheckResult a = compare_bytes(f32({1.0f, 2.25f, 4.0f}), r);
  CHECK(a.verdict == Verdict::WITHIN_BOUND);
  CHECK(a.mismatches == 0);
  CHECK(a.message.find("1 element(s) at an accepted candidate pattern") != std::string::npos);
  CHECK(a.message.find("byte 1") != std::string::npos);
  CHECK(compare_bytes(f32({1.0f, 2.0f, 4.0f}), r).verdict == Verdict::BITEXACT);
  CHECK(compare_bytes(f32({1.0f, 2.5f, 4.0f}), r).verdict == Verdict::FAIL);   // not a candidate of element 1
  CHECK(compare_bytes(f32({2.25f, 2.0f, 4.0f}), r).verdict == Verdict::FAIL);  // element 0 has no candidates
  const CheckResult m = compare_bytes(f32({1.0f, 2.25f, 5.0f}), r);  // a candidate and a mismatch: FAIL
  CHECK(m.verdict == Verdict::FAIL);
  CHECK(m.mismatches == 1);
}

TEST_CASE("compare: tolerance overrides, profiles and emulation request") {
  CHECK(parse_tol_override("logits:1e-3") == std::pair<std::string, double>{"logits", 1e-3});
  CHECK(parse_tol_override("2.5e-4") == std::pair<std::string, double>{"", 2.5e-4});
  CHECK_THROWS_AS(parse_tol_override("logits:abc"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tol_override("-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tol_override("logits:"), std::invalid_argument);

  CheckOptions o;
  CHECK(resolve(logits_case(), "logits", o).profile == "sm90-fp8");
  CHECK(resolve(logits_case(), "logits", o).rtol == std::ldexp(1.0, -10));
  CHECK(resolve(logits_case("bf16"), "logits", o).profile == "bf16-logits");
  o.tol.policy = "exact";
  CHECK(resolve(logits_case("bf16"), "logits", o).rtol == std::ldexp(1.0, -22));
  o.tol.rtol = {{"", 1e-2}, {"logits", 1e-3}, {"other", 5.0}};
  o.tol.atol = {{"", 1e-4}};
  const Tolerance t = resolve(logits_case(), "logits", o);
  CHECK(t.rtol == 1e-3);  // the tensor's own override beats the bare one
  CHECK(t.atol == 1e-4);
  CHECK(t.profile == "exact+override");
  o.tol.policy = "nope";
  CHECK_THROWS_AS(resolve(logits_case(), "logits", o), std::invalid_argument);

  Case k = logits_case();
  CHECK(requested_emulation(bind(k), {}) == nullptr);
  k.attrs["kernel"] = std::string("deepgemm-sm90");
  REQUIRE(requested_emulation(bind(k), {}) != nullptr);
  CHECK(requested_emulation(bind(k), {})->name == "deepgemm-sm90");
  // The kernel profile's tolerance applies (deepgemm-sm90 declares sm90-fp8).
  CHECK(resolve(k, "logits", {}).profile == find_profile("deepgemm-sm90")->on("indexer.logits_ragged")->tolerance);
  CheckOptions ne;
  ne.no_emulation = true;
  CHECK(requested_emulation(bind(k), ne) == nullptr);
  k.attrs["kernel"] = std::string("some-other-kernel");  // (the schema rejects it before a check runs)
  CHECK(requested_emulation(bind(k), {}) == nullptr);
}

TEST_CASE("compare_tensor: shape and dtype gates, emulation policy") {
  Case c = logits_case();
  RefTensor r = bounded_ref({1.0f, 2.0f});
  CHECK(compare_tensor(bind(c), "outputs", f32({1.0f, 2.0f, 3.0f}), r, {}).verdict == Verdict::SHAPE);
  CHECK(compare_tensor(bind(c), "outputs", Tensor::zeros(DType::bf16, {2}), r, {}).verdict == Verdict::DTYPE);

  c.attrs["kernel"] = std::string("deepgemm-sm90");
  r.emulations["deepgemm-sm90"] = f32({1.0f, 2.0009765625f});  // what the kernel really computes
  CheckResult e = compare_tensor(bind(c), "outputs", f32({1.0f, 2.0009765625f}), r, {});
  CHECK(e.verdict == Verdict::BITEXACT);
  CHECK(e.emulation_mismatches == 0);
  // Exact value: inside the sm90 bound (2^-10 * 2) but not what the emulation says -> FAIL by default.
  e = compare_tensor(bind(c), "outputs", f32({1.0f, 2.0f}), r, {});
  CHECK(e.verdict == Verdict::FAIL);
  CHECK(e.emulation_mismatches == 1);
  CHECK(e.message.find("not bit-exact vs deepgemm-sm90 emulation (1 elements") != std::string::npos);
  CHECK(e.message.find("within sm90-fp8 bound") != std::string::npos);
  CheckOptions ne;
  ne.no_emulation = true;
  CHECK(compare_tensor(bind(c), "outputs", f32({1.0f, 2.0f}), r, ne).verdict == Verdict::BITEXACT);
  // A golden (expected/) holding the exact value is not a kernel claiming sm90: judged by the bound, with a note.
  e = compare_tensor(bind(c), "expected", f32({1.0f, 2.0f}), r, {});
  CHECK(e.verdict == Verdict::BITEXACT);
  CHECK(e.notes.size() == 1);
  CHECK(compare_tensor(bind(c), "expected", f32({1.0f, 2.5f}), r, {}).verdict == Verdict::FAIL);
}

TEST_CASE("compare: sanity findings B5 and B6") {
  Case c;
  c.stage = "indexer.quant";
  const BoundCase qb{&c, find_stage(c.stage), nullptr};
  const auto f = sanity_findings(qb, "scale", f32({1.0f, 0.0f, -2.0f}), nullptr);
  REQUIRE(f.size() == 1);
  CHECK(f[0].find("B5: 2 scale(s)") != std::string::npos);
  RefTensor same;
  same.value = f32({1.0f, 0.0f, -2.0f});
  CHECK(sanity_findings(qb, "scale", f32({1.0f, 0.0f, -2.0f}), &same).empty());  // the reference has them too

  Case l = logits_case();
  RefTensor ref;
  ref.value = Tensor::from_vector(DType::f32, {2, 3}, std::vector<float>{1, 2, 3, 4, 4, 4});
  const Tensor out = Tensor::from_vector(DType::f32, {2, 3}, std::vector<float>{0, 0, 0, 4, 4, 4});
  const auto g = sanity_findings(bind(l), "logits", out, &ref);
  REQUIRE(g.size() == 1);  // row 1 is constant in the reference as well
  CHECK(g[0].find("B6: 1 logit row(s)") != std::string::npos);
}

TEST_CASE("compare: first divergence follows pipeline_order") {
  auto res = [](std::string stage, std::string cs, bool pass) {
    CheckResult r;
    r.file = "f.h5";
    r.stage = std::move(stage);
    r.case_name = std::move(cs);
    r.verdict = pass ? Verdict::BITEXACT : Verdict::FAIL;
    return r;
  };
  // Listed out of pipeline order on purpose (the table order): topk fails, logits fails, quant passes.
  std::vector<CheckResult> v{res("indexer.topk", "t", false), res("indexer.logits_ragged", "l", false),
                             res("indexer.quant", "q", true)};
  auto d = pipeline::first_divergence(v);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "first divergence in f.h5: stage indexer.logits_ragged (case 'l'), 1 later failing case(s)");
  // Grouped by step: step 1 has only one stage -> no line; step 2 holds two stages.
  v[0].step = "2";
  v[1].step = "1";
  v[2].step = "2";
  d = pipeline::first_divergence(v);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "first divergence in f.h5 (step 2): stage indexer.topk (case 't')");
  v[0].verdict = v[1].verdict = Verdict::WITHIN_BOUND;
  for (auto& x : v) x.step.clear();
  d = pipeline::first_divergence(v);
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "no divergence in f.h5: all 3 stages pass");
}

TEST_CASE("compare: JSON and JUnit reports, atomic write") {
  report::RunReport rep;
  CheckResult a;
  a.file = "a.h5";
  a.case_name = "c1";
  a.stage = "indexer.quant";
  a.tensor = "y";
  a.verdict = Verdict::BITEXACT;
  CheckResult b = a;
  b.tensor = "scale";
  b.verdict = Verdict::FAIL;
  b.message = "1 of 2 elements differ <&\"'>";
  rep.results = {a, b};
  CHECK(rep.passed() == 1);
  CHECK(rep.failed() == 1);
  CHECK(rep.exit_code() == 1);
  const auto j = report::report_json(rep);
  CHECK(j["summary"]["passed"] == 1);
  CHECK(j["results"][1]["verdict"] == "FAIL");
  CHECK(j["results"][1]["pass"] == false);
  const std::string x = report::junit_xml(rep);
  CHECK(x.find("<failure type=\"FAIL\" message=\"1 of 2 elements differ &lt;&amp;&quot;&apos;&gt;\"") != std::string::npos);
  CHECK(x.find("classname=\"indexer.quant.c1\" name=\"outputs/scale\"") != std::string::npos);
  rep.problems.push_back("x.h5: no such file");
  CHECK(rep.exit_code() == 2);
  CHECK(report::xml_escape(std::string("a\x01" "b")) == "a\\x01b");  // visible, and well-formed XML
  CHECK(num_json(kInf) == "inf");

  const auto dir = std::filesystem::temp_directory_path() / ("dsa_cmp_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string p = (dir / "r.json").string();
  CHECK(io::write_text_atomic(p, "{}\n").empty());
  std::ifstream in(p);
  std::string s;
  std::getline(in, s);
  CHECK(s == "{}");
  CHECK(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator{}) == 1);  // no temp left
  CHECK(!io::write_text_atomic((dir / "missing" / "r.json").string(), "{}").empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("compare_bounded: the same result on any thread count and any tiling, sums in the documented block order") {
  // 12.5 blocks of BoundedAccumulator::kSumBlock elements: equal bits, small and large errors, NaN pairs, a broken
  // -inf mask, undefined elements; magnitudes, a peer metric, the systematic gate and the plots all on.
  const std::int64_t B = BoundedAccumulator::kSumBlock, n = 12 * B + B / 2;
  std::vector<float> ev(static_cast<std::size_t>(n)), ov(ev.size());
  std::vector<double> mv(ev.size());
  std::vector<std::uint8_t> dv(ev.size());
  std::uint64_t st = 0x9E3779B97F4A7C15ull;
  auto rnd = [&] {
    st ^= st << 13, st ^= st >> 7, st ^= st << 17;
    return static_cast<double>(st >> 11) * 0x1p-53;
  };
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const double u = rnd();
    ev[i] = static_cast<float>(4 * rnd() - 2);
    mv[i] = std::fabs(ev[i]) + 0.25;
    dv[i] = u < 0.97 ? 1 : 0;
    ov[i] = ev[i];
    if (u < 0.2) ov[i] = ev[i] + static_cast<float>(1e-3 * (rnd() - 0.3));  // small errors, a biased sign
    else if (u < 0.2005) ov[i] = ev[i] + 1.0f;                               // outside the bound
    else if (u < 0.201) ev[i] = ov[i] = std::numeric_limits<float>::quiet_NaN();
    else if (u < 0.2012) ev[i] = -std::numeric_limits<float>::infinity();   // the kernel misses the mask
  }
  auto slice = [&](std::int64_t a, std::int64_t b, Tensor* out) {
    RefTensor r;
    r.name = "x";
    r.kind = CompareKind::bounded;
    r.mask_must_match = true;
    r.systematic_floor = 1e-9;
    r.peers = {PeerMetric{"peer", 1e-4, 1e-4, 1e-6, 1e-5}};
    r.flat_offset = a;
    auto sub = [&](const auto& v) { return std::vector<typename std::decay_t<decltype(v)>::value_type>(v.begin() + a, v.begin() + b); };
    r.value = Tensor::from_vector(DType::f32, {b - a}, sub(ev));
    r.magnitude = Tensor::from_vector(DType::f64, {b - a}, sub(mv));
    r.defined = Tensor::from_vector(DType::u8, {b - a}, sub(dv));
    *out = Tensor::from_vector(DType::f32, {b - a}, sub(ov));
    return r;
  };
  const Tolerance tol{"t", 1e-3, 0.0};
  auto run = [&](int threads, const std::vector<std::int64_t>& cuts) {
    Tensor o;
    BoundedAccumulator acc(tol, slice(0, 1, &o), DType::f32);
    acc.set_threads(threads);
    acc.collect_plot(n / 64, 64);
    std::int64_t a = 0;
    for (std::int64_t c : cuts) {
      const RefTensor r = slice(a, c, &o);
      acc.add(o, r);
      a = c;
    }
    return acc.finish();
  };
  const CheckResult one = run(1, {n});
  CHECK(one.verdict == Verdict::MASK_MISMATCH);
  REQUIRE(one.bounded);
  for (const CheckResult& r : {run(2, {n}), run(5, {n}), run(3, {777, 5000, 5001, 2 * B, 7 * B + 3, n}), run(1, {B - 1, B + 1, n})}) {
    CHECK(r.verdict == one.verdict);
    CHECK(r.message == one.message);
    CHECK(r.notes == one.notes);
    CHECK(r.bounded->cosine == one.bounded->cosine);
    CHECK(r.bounded->calc_diff == one.bounded->calc_diff);
    CHECK(r.bounded->compared == one.bounded->compared);
    CHECK(r.bounded->max_ulp == one.bounded->max_ulp);
    CHECK(r.bounded->min_rtol == one.bounded->min_rtol);
    CHECK(r.first->flat == one.first->flat);
    REQUIRE(r.plot);
    CHECK(r.plot->heat->code == one.plot->heat->code);
    CHECK(r.plot->heat->flag == one.plot->heat->flag);
    CHECK(r.plot->hist->bins == one.plot->hist->bins);
    REQUIRE(r.plot->worst.size() == one.plot->worst.size());
    for (std::size_t k = 0; k < r.plot->worst.size(); ++k) CHECK(r.plot->worst[k].flat == one.plot->worst[k].flat);
    REQUIRE(r.plot->breaks.size() == one.plot->breaks.size());
    for (std::size_t k = 0; k < r.plot->breaks.size(); ++k) CHECK(r.plot->breaks[k].flat == one.plot->breaks[k].flat);
  }
  // The documented order, written out: lanes (flat mod 8) within blocks, tree of the lanes, blocks in order.
  double sxy = 0, sxx = 0, syy = 0;
  for (std::int64_t b0 = 0; b0 < n; b0 += B) {
    double lxy[8] = {}, lxx[8] = {}, lyy[8] = {};
    for (std::int64_t i = b0; i < std::min(n, b0 + B); ++i) {
      const double o = ov[static_cast<std::size_t>(i)], e = ev[static_cast<std::size_t>(i)];
      if (!dv[static_cast<std::size_t>(i)] || !std::isfinite(o) || !std::isfinite(e)) continue;
      lxy[i % 8] += o * e, lxx[i % 8] += o * o, lyy[i % 8] += e * e;
    }
    auto t8 = [](const double* x) { return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); };
    sxy += t8(lxy), sxx += t8(lxx), syy += t8(lyy);
  }
  CHECK(one.bounded->cosine == sxy / std::sqrt(sxx * syy));
  CHECK(one.bounded->calc_diff == 1.0 - 2.0 * sxy / (sxx + syy));
}
