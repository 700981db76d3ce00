// Golden data: catalogue coverage, generator properties (adversarial by construction), determinism across
// thread counts, MANIFEST, atomic failure behaviour, CLI exit codes and the committed-golden reproducibility gate.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "pipeline/catalogue.hpp"
#include "numerics/det_math.hpp"
#include "pipeline/golden.hpp"
#include "io/h5io.hpp"
#include "numerics/formats.hpp"
#include "stage/stage.hpp"

namespace fs = std::filesystem;
using namespace dsa;
using namespace dsa::golden;

namespace {

fs::path temp_dir(const std::string& tag) {
  static int n = 0;
  fs::path p = fs::temp_directory_path() / ("dsa_golden_test_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(n++));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::set<std::string> listing(const fs::path& d) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(d)) s.insert(e.path().filename().string());
  return s;
}

int run(const std::string& cmd) {
  const int st = std::system((cmd + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Case gen(const std::string& name, int threads = 1) {
  const GoldenSpec* s = find_spec(name);
  REQUIRE(s != nullptr);
  return make_case(*s, std::nullopt, threads);
}

}  // namespace

TEST_CASE("golden: catalogue covers every registered stage and names the required adversarial cases") {
  std::set<std::string> names, stages_covered, committed_stages;
  for (const auto& s : catalogue()) {
    CHECK_MESSAGE(names.insert(s.name).second, "duplicate case " << s.name);
    const Generator* g = find_generator(s.generator);
    REQUIRE_MESSAGE(g != nullptr, s.name << ": unknown generator " << s.generator);
    CHECK_MESSAGE(g->stage == s.stage, s.name);
    CHECK(find_stage(s.stage) != nullptr);
    CHECK_FALSE(s.doc.empty());
    stages_covered.insert(s.stage);
    if (s.committed) committed_stages.insert(s.stage);
  }
  for (const auto& st : stages()) {
    CHECK_MESSAGE(stages_covered.count(st.name), "no golden case for stage " << st.name);
    CHECK_MESSAGE(committed_stages.count(st.name), "no committed golden for stage " << st.name);
  }
  // Committed: a top-k row longer than k, an MTP case, a tie-heavy case; catalogue: lengths 0,1,k-1,k,k+1,2^16+-1.
  bool sparse = false, mtp = false, ties = false;
  std::set<std::int64_t> lens;
  for (const auto& s : catalogue()) {
    if (s.stage == "indexer.topk")
      for (auto l : s.list("lengths")) {
        lens.insert(l);
        if (s.committed && l > s.model.topk) sparse = true;
      }
    if (s.committed && s.stage == "indexer.logits_paged" && s.dim("next_n", 1) > 1) mtp = true;
    if (s.committed && s.generator == "topk.ties_at_kth") ties = true;
  }
  CHECK(sparse);
  CHECK(mtp);
  CHECK(ties);
  for (std::int64_t l : {0, 1, 2047, 2048, 2049, 65535, 65537}) CHECK_MESSAGE(lens.count(l), "length " << l);
}

TEST_CASE("golden: every stage with float inputs has a NaN/inf golden, and its NaNs carry the CUDA-canonical codes") {
  std::set<std::string> poisoned;
  for (const auto& spec : catalogue()) {
    if (spec.poison.empty()) continue;
    CHECK(spec.committed);
    poisoned.insert(spec.stage);
    const Case c = make_case(spec, std::nullopt, 1);
    // The planted values are there.
    for (const auto& p : spec.poison) {
      const Tensor& t = c.input(p.tensor);
      const std::int64_t per = t.numel() / t.dim(0), at = p.row * per + (p.elem < 0 ? 0 : p.elem);
      const double v = t.value(at);
      if (std::isnan(p.value) || t.dtype() == DType::fp8_e4m3fn) CHECK(std::isnan(v));
      else CHECK(v == p.value);
    }
    std::int64_t nans = 0, float_outputs = 0;
    for (const auto& [n, t] : c.expected) {
      if (!dtype_is_float(t.dtype())) continue;
      ++float_outputs;
      for (std::int64_t i = 0; i < t.numel(); ++i) {
        if (!std::isnan(t.value(i))) continue;
        ++nans;
        const std::uint64_t b = t.bits(i);
        switch (t.dtype()) {
          case DType::f32: CHECK(b == 0x7FFFFFFFu); break;
          case DType::bf16: case DType::fp16: CHECK(b == 0x7FFFu); break;
          case DType::fp8_e4m3fn: case DType::fp8_e5m2: CHECK(b == 0x7Fu); break;
          default: break;
        }
      }
    }
    // Every float-output stage's NaN golden has NaNs in its expected outputs (the K cache is bytes: kept as given).
    if (spec.stage != "indexer.kcache_store" && float_outputs > 0) CHECK_MESSAGE(nans > 0, spec.name);
    if (spec.stage == "indexer.kcache_store") {  // both NaN codes survive the data move
      const Tensor& kv = c.expected.at("kv_cache");
      std::set<std::uint8_t> bytes(kv.data<std::uint8_t>(), kv.data<std::uint8_t>() + kv.numel());
      CHECK(bytes.count(0x7F));
      CHECK(bytes.count(0xFF));
    }
  }
  for (const Stage& st : stages()) {
    bool reads_float = false;
    for (const auto& in : st.schema.inputs)
      for (DType d : in.dtypes) reads_float = reads_float || dtype_is_float(d);
    if (reads_float) CHECK_MESSAGE(poisoned.count(st.name) == 1, st.name);
  }
}

TEST_CASE("golden: deterministic sin/cos agree with libm to 2 ulp (absolute)") {
  for (int i = 0; i < 4000; ++i) {
    const double x = -20000.0 + 10.0 * i + 0.123456789 * i;
    const double s = num::det_sin(x), c = num::det_cos(x);
    CHECK(std::fabs(s - std::sin(x)) <= 4.5e-16);  // 2 ulp of values in [0.5, 1)
    CHECK(std::fabs(c - std::cos(x)) <= 4.5e-16);
  }
}

TEST_CASE("golden: generation and references are identical for 1 and 2 threads - --seed changes the inputs") {
  for (const char* n : {"quant_gaussian_outliers", "prolog_neox_hadamard", "kcache_shuffled_padded", "ragged_cp_split",
                        "paged_mtp_n4", "topk_ties_at_kth"}) {
    const GoldenSpec* s = find_spec(n);
    REQUIRE(s);
    const auto a = manifest_lines("f", make_case(*s, std::nullopt, 1));
    const auto b = manifest_lines("f", make_case(*s, std::nullopt, 2));
    CHECK_MESSAGE(a == b, n);
    const auto c = manifest_lines("f", make_case(*s, s->seed + 1, 2));
    CHECK_MESSAGE(a != c, n);
  }
}

TEST_CASE("golden: generators produce the adversarial inputs they promise") {
  SUBCASE("fp8 saturation: codes at +-448 (0x7E / 0xFE)") {
    for (const char* n : {"quant_saturation_ue8m0", "quant_saturation_fp32_scales"}) {
      Case c = gen(n);
      const auto y = c.expected.at("y").span<const std::uint8_t>();
      CHECK(std::count_if(y.begin(), y.end(), [](std::uint8_t v) { return (v & 0x7F) == 0x7E; }) > 50);
    }
  }
  SUBCASE("subnormal range and the amax clamp") {
    Case c = gen("quant_subnormal");
    const auto y = c.expected.at("y").span<const std::uint8_t>();
    CHECK(std::count_if(y.begin(), y.end(), [](std::uint8_t v) { return (v & 0x78) == 0 && (v & 0x07) != 0; }) > 100);
    CHECK(std::count_if(y.begin(), y.end(), [](std::uint8_t v) { return (v & 0x7F) == 0; }) > 100);
    const auto sc = c.expected.at("scale").span<const float>();
    // Blocks entirely below 1e-4: scale = 2^ceil(log2(1e-4/448)) = 2^-22.
    CHECK(std::count(sc.begin(), sc.end(), std::ldexp(1.0f, -22)) > 0);
  }
  SUBCASE("ties at the k-th value") {
    Case c = gen("topk_ties_at_kth");
    const Tensor& lg = c.inputs.at("logits");
    const std::int64_t L = c.inputs.at("lengths").data<std::int32_t>()[0], k = c.attr_int("k");
    std::vector<float> row(lg.data<float>(), lg.data<float>() + L);
    std::sort(row.begin(), row.end(), std::greater<float>());
    const float kth = row[static_cast<std::size_t>(k - 1)];
    CHECK(std::count(row.begin(), row.end(), kth) >= 1000);
  }
  SUBCASE("near ties within one ulp") {
    Case c = gen("topk_near_ties");
    const Tensor& lg = c.inputs.at("logits");
    const std::int64_t L = c.inputs.at("lengths").data<std::int32_t>()[0];
    auto [mn, mx] = std::minmax_element(lg.data<float>(), lg.data<float>() + L);
    CHECK(*mx > *mn);
    CHECK(std::nextafter(std::nextafter(*mn, INFINITY), INFINITY) >= *mx);
  }
  SUBCASE("shuffled padded slots, poison cache") {
    Case c = gen("kcache_shuffled_padded");
    const auto sm = c.inputs.at("slot_mapping").span<const std::int64_t>();
    CHECK(std::count(sm.begin(), sm.end(), -1) > 0);
    CHECK_FALSE(std::is_sorted(sm.begin(), sm.end()));
    std::set<std::int64_t> u;
    for (auto v : sm)
      if (v >= 0) CHECK(u.insert(v).second);
  }
  SUBCASE("paged: shuffled, sparse block table and MTP rows") {
    Case c = gen("paged_mtp_n4");
    CHECK(c.inputs.at("q").dim(1) == 4);
    const auto bt = c.inputs.at("block_table").span<const std::int32_t>();
    CHECK(std::count(bt.begin(), bt.end(), -1) > 0);
    std::vector<std::int32_t> used;
    for (auto v : bt)
      if (v >= 0) used.push_back(v);
    CHECK_FALSE(std::is_sorted(used.begin(), used.end()));
  }
  SUBCASE("chunked prefill rows have ks > 0; CP rows are non-contiguous") {
    Case c = gen("ragged_chunked_prefill");
    const auto ks = c.inputs.at("ks").span<const std::int32_t>();
    CHECK(*std::max_element(ks.begin(), ks.end()) > 0);
    Case d = gen("ragged_cp_split");
    const auto ke = d.inputs.at("ke").span<const std::int32_t>();
    const std::size_t h = ke.size() / 2;
    CHECK(ke[h] - ke[h - 1] > 1);  // jump from the prev chunk to the next chunk
  }
  SUBCASE("all-negative pre-ReLU scores: even rows have q <= 0 and keys >= 0, so every logit is 0") {
    Case c = gen("ragged_all_negative_bf16");
    const Tensor& q = c.inputs.at("q");
    const Tensor& kv = c.inputs.at("kv");
    const std::int64_t HD = q.dim(1) * q.dim(2);
    for (std::int64_t i = 0; i < HD; ++i) CHECK(num::e4m3_to_f32(q.data<std::uint8_t>()[i]) <= 0.0f);
    for (std::int64_t i = 0; i < kv.numel(); ++i) CHECK(num::e4m3_to_f32(kv.data<std::uint8_t>()[i]) >= 0.0f);
    const Tensor& lg = c.expected.at("logits");
    const std::int32_t ks = c.inputs.at("ks").data<std::int32_t>()[0], ke = c.inputs.at("ke").data<std::int32_t>()[0];
    for (std::int32_t j = ks; j < ke; ++j) CHECK(lg.value(j) == 0.0);
  }
  SUBCASE("engine-fed logits inputs: fp8 q codes and W with pow2 q_scale folded in") {
    Case c = gen("ragged_h32_compressed");
    CHECK(c.inputs.at("q").dtype() == DType::fp8_e4m3fn);
    // Each q head block came from act_quant: some |code| is in the top binade [256, 448].
    const Tensor& q = c.inputs.at("q");
    const std::int64_t D = q.dim(2);
    for (std::int64_t b = 0; b < q.numel() / D; ++b) {
      float amax = 0;
      for (std::int64_t d = 0; d < D; ++d) amax = std::max(amax, std::fabs(num::e4m3_to_f32(q.data<std::uint8_t>()[b * D + d])));
      CHECK(amax >= 224.0f);
      CHECK(amax <= 448.0f);
    }
  }
}

TEST_CASE("golden: write_goldens writes files + MANIFEST atomically and merges the MANIFEST") {
  const fs::path d = temp_dir("ok");
  GoldenOptions o;
  o.out_dir = d.string();
  write_goldens({find_spec("quant_subnormal"), find_spec("topk_near_ties")}, o);
  CHECK(listing(d) == std::set<std::string>{"MANIFEST", "quant_subnormal.h5", "topk_near_ties.h5"});
  const std::string m1 = slurp(d / "MANIFEST");
  // The MANIFEST hashes what a reader gets back from the file.
  auto rr = io::read_file((d / "quant_subnormal.h5").string());
  REQUIRE(rr.ok());
  for (const auto& l : manifest_lines("quant_subnormal.h5", rr.cases.at(0))) CHECK(m1.find(l + "\n") != std::string::npos);
  // Regenerating one file keeps the other file's lines.
  write_goldens({find_spec("quant_subnormal")}, o);
  CHECK(slurp(d / "MANIFEST") == m1);
  fs::remove_all(d);
}

TEST_CASE("golden: a failing writer (disk full) leaves nothing behind") {
  const fs::path d = temp_dir("fail");
  { std::ofstream(d / "keep.txt") << "x"; }
  int calls = 0;
  io::g_before_rename_hook = [&](const std::string&) {
    if (++calls == 2) throw std::runtime_error("No space left on device");
  };
  GoldenOptions o;
  o.out_dir = d.string();
  CHECK_THROWS_WITH_AS(write_goldens({find_spec("quant_subnormal"), find_spec("topk_near_ties")}, o),
                       doctest::Contains("No space left on device"), std::runtime_error);
  io::g_before_rename_hook = nullptr;
  CHECK(listing(d) == std::set<std::string>{"keep.txt"});
  // Missing / non-directory output.
  o.out_dir = (d / "missing").string();
  CHECK_THROWS_WITH_AS(write_goldens({find_spec("quant_subnormal")}, o), doctest::Contains("does not exist"), std::runtime_error);
  o.out_dir = (d / "keep.txt").string();
  CHECK_THROWS_WITH_AS(write_goldens({find_spec("quant_subnormal")}, o), doctest::Contains("not a directory"), std::runtime_error);
  CHECK(listing(d) == std::set<std::string>{"keep.txt"});
  fs::remove_all(d);
}

TEST_CASE("golden: seed parsing") {
  CHECK(parse_seed("0") == 0);
  CHECK(parse_seed("18446744073709551615") == ~std::uint64_t{0});
  CHECK(parse_seed("0x10") == 16);
  for (const char* bad : {"", "-1", "12a", "18446744073709551616", "0x", " 5", "1.5"})
    CHECK_THROWS_AS(parse_seed(bad), std::invalid_argument);
}

TEST_CASE("golden: CLI exit codes and messages") {
  const std::string bin = DSA_CHECK_BIN;
  const fs::path d = temp_dir("cli");
  CHECK(run(bin + " golden --list") == 0);
  CHECK(run(bin + " golden --case no_such_case --out " + d.string()) == 2);
  CHECK(run(bin + " golden --case quant_subnormal --seed banana --out " + d.string()) == 2);
  CHECK(run(bin + " golden --case quant_subnormal --out " + (d / "missing").string()) == 2);
  CHECK(run(bin + " golden --case quant_subnormal") == 2);
  CHECK(run(bin + " golden") == 2);
  CHECK(listing(d).empty());
  CHECK(run(bin + " golden --case quant_subnormal --seed 0x2a --out " + d.string()) == 0);
  CHECK(listing(d) == std::set<std::string>{"MANIFEST", "quant_subnormal.h5"});
  fs::remove_all(d);
}

// The 2-thread regeneration is covered by the make_case test above, tests/python/test_golden_manifest.py and the
// gate in scripts/test.sh; one regeneration here keeps the sanitizer build fast.
TEST_CASE("golden: committed goldens reproduce bit for bit and check BITEXACT") {
  const fs::path src = fs::path(DSA_SOURCE_DIR) / "golden";
  REQUIRE(fs::exists(src / "MANIFEST"));
  const std::string bin = DSA_CHECK_BIN;
  const std::string committed = slurp(src / "MANIFEST");
  for (int j : {1}) {
    const fs::path d = temp_dir("repro" + std::to_string(j));
    REQUIRE(run(bin + " golden --committed -j " + std::to_string(j) + " --out " + d.string()) == 0);
    CHECK_MESSAGE(slurp(d / "MANIFEST") == committed,
                  "regenerated MANIFEST differs from golden/MANIFEST (-j " << j << "): regenerate with "
                  "`dsa-check golden --committed --out golden` if a reference changed on purpose");
    fs::remove_all(d);
  }
  std::string files;
  for (const auto& e : fs::directory_iterator(src))
    if (e.path().extension() == ".h5") files += " " + e.path().string();
  CHECK(run(bin + " check -q" + files) == 0);
}

TEST_CASE("golden: demo pair gives PASS and FAIL") {
  const fs::path demo = fs::path(DSA_SOURCE_DIR) / "golden" / "demo";
  const std::string bin = DSA_CHECK_BIN;
  CHECK(run(bin + " check " + (demo / "demo_pass.h5").string()) == 0);
  CHECK(run(bin + " check " + (demo / "demo_fail.h5").string()) == 1);
}

TEST_CASE("golden: deterministic exp/log agree with libm to 2 ulp, special values exact") {
  for (int i = 0; i < 20000; ++i) {
    const double x = -744.0 + 0.0727 * i + 1e-9 * i * i;  // covers [-744, 710): normal and subnormal results
    if (x > 709.7) break;
    const double a = num::det_exp(x), b = std::exp(x);
    CHECK_MESSAGE(std::fabs(a - b) <= 2.0 * std::fabs(b) * 0x1p-52 + 0x1p-1074, x);
  }
  for (int i = 1; i < 20000; ++i) {
    const double x = std::ldexp(1.0 + 0.000137 * i, (i % 2090) - 1070);  // normal and subnormal inputs
    const double a = num::det_log(x), b = std::log(x);
    CHECK_MESSAGE(std::fabs(a - b) <= 2.0 * std::fabs(b) * 0x1p-52 + 0x1p-60, x);
  }
  CHECK(num::det_exp(0.0) == 1.0);
  CHECK(num::det_log(1.0) == 0.0);
  CHECK(num::det_exp(-std::numeric_limits<double>::infinity()) == 0.0);
  CHECK(num::det_exp(std::numeric_limits<double>::infinity()) == std::numeric_limits<double>::infinity());
  CHECK(num::det_exp(710.0) == std::numeric_limits<double>::infinity());
  CHECK(num::det_log(0.0) == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(num::det_log(-1.0)));
  CHECK(std::isnan(num::det_exp(std::numeric_limits<double>::quiet_NaN())));
}
