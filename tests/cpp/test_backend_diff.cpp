// backend-diff: the determinism contract as a check. The CPU reference against itself with 1 and 3 threads must give
// identical bytes on every committed golden and every stage's selftest case (emulation included); the differ must
// name what differs; a backend without an implementation is an error, not a pass.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backend/cuda.hpp"
#include "pipeline/backend_diff.hpp"
#include "pipeline/golden.hpp"

using namespace dsa;

namespace {

int run_cli(const std::string& args, std::string* out) {
  const std::string log = std::filesystem::temp_directory_path() / ("dsa_bd_" + std::to_string(::getpid()) + ".log");
  const int st = std::system((std::string(DSA_CHECK_BIN) + " " + args + " > " + log + " 2>&1").c_str());
  std::ifstream f(log);
  *out = std::string(std::istreambuf_iterator<char>(f), {});
  std::filesystem::remove(log);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

}  // namespace

TEST_CASE("backend-diff: CPU 1 vs 3 threads identical on every stage's selftest cases") {
  const pipeline::Impl one{Backend::cpu, 1}, three{Backend::cpu, 3};
  int n = 0;
  for (const Stage& st : stages())
    for (const auto& spec : st.selftest) {
      for (std::uint64_t seed : {1u, 2u}) {
        const Case c = golden::make_case(spec, seed, 1);
        const auto d = pipeline::diff_references(c, one, three);
        INFO(spec.name << " seed " << seed << (d.empty() ? "" : ": " + d[0].tensor + ": " + d[0].message));
        CHECK(d.empty());
        ++n;
      }
    }
  CHECK(n >= 18);
}

TEST_CASE("backend-diff: the differ names each differing part") {
  const golden::GoldenSpec* g = nullptr;
  for (const auto& s : find_stage("indexer.logits_ragged")->selftest)
    if (s.name == "ragged_sm90") g = &s;
  REQUIRE(g != nullptr);
  const Case c = golden::make_case(*g, std::nullopt, 1);
  BoundCase b;
  REQUIRE(validate_case(c, false, &b).empty());
  RefOptions ro;
  ro.emulation = kernel_profile(c);
  REQUIRE(ro.emulation != nullptr);
  const Expected e = run_reference(b, ro);
  CHECK(pipeline::diff_expected(e, e, "x", "y").empty());

  Expected f = e;
  RefTensor& t = f.tensors.at(0);
  t.value = t.value.clone();
  t.value.set_value(3, t.value.value(3) * 2.0 + 1.0);
  t.magnitude = t.magnitude.clone();
  t.magnitude.data<double>()[5] += 1.0;
  t.emulations.clear();
  const auto d = pipeline::diff_expected(e, f, "cpu:1", "cpu:3");
  REQUIRE(d.size() == 3);
  CHECK(d[0].tensor == "logits");
  CHECK(d[0].message.find("1 of ") != std::string::npos);
  CHECK(d[0].message.find("first at flat index 3") != std::string::npos);
  CHECK(d[1].tensor == "logits.magnitude");
  CHECK(d[2].tensor == "logits.emulation[deepgemm-sm90]");
  CHECK(d[2].message == "missing on cpu:3");
}

TEST_CASE("backend-diff: top-k bands and index maps are compared too") {
  const golden::GoldenSpec* g = nullptr;
  for (const auto& s : find_stage("indexer.topk")->selftest)
    if (s.name == "topk_page") g = &s;
  REQUIRE(g != nullptr);
  const Case c = golden::make_case(*g, std::nullopt, 1);
  const Expected e = run_reference(c);
  Expected f = e;
  f.tensors.at(0).topk.kth.at(1) += 1.0;
  f.tensors.at(0).topk.to_index = [](std::int64_t, std::int64_t p) { return p; };  // page_slot mapping lost
  const auto d = pipeline::diff_expected(e, f, "a", "b");
  REQUIRE(d.size() == 2);
  CHECK(d[0].tensor == "indices.kth");
  CHECK(d[0].message == "differs first at row 1");
  CHECK(d[1].tensor == "indices.index_map");
}

TEST_CASE("backend-diff CLI: committed goldens identical for 1 vs 3 threads, a missing backend is an error") {
  std::string out;
  std::string files;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(DSA_SOURCE_DIR) + "/golden"))
    if (e.path().extension() == ".h5") {
      files += " " + e.path().string();
      ++n;
    }
  REQUIRE(n >= 20);
  CHECK(run_cli("backend-diff --a cpu:1 --b cpu:3" + files, &out) == 0);
  INFO(out);
  // One line per case: a layer golden holds several.
  const auto pos = out.find(" identical, 0 different");
  REQUIRE(pos != std::string::npos);
  const auto start = out.rfind('\n', pos);
  CHECK(std::stoi(out.substr(start == std::string::npos ? 0 : start + 1, pos)) >= n);
  // A stage without a CUDA implementation is an error, not a pass; without a usable device, that is said first.
  std::string no_cuda;  // a committed golden of such a stage, if one is left
  for (const Stage& st : stages())
    for (const auto& g : st.goldens)
      if (g.committed && !st.impl_for(Backend::cuda) && no_cuda.empty()) no_cuda = std::string(DSA_SOURCE_DIR) + "/golden/" + g.name + ".h5";
  const std::string why = cuda::device_problem();
  if (!no_cuda.empty() || !why.empty()) {
    CHECK(run_cli("backend-diff --a cpu --b cuda " + (no_cuda.empty() ? std::string(DSA_SOURCE_DIR) + "/golden/quant_subnormal.h5" : no_cuda), &out) == 2);
    CHECK(out.find(why.empty() ? "has no cuda implementation" : why) != std::string::npos);
    if (why.empty()) {  // the message names the file and case once
      const auto at = out.find("has no cuda implementation"), bol = out.rfind('\n', at);
      const std::string line = out.substr(bol == std::string::npos ? 0 : bol + 1, at - (bol == std::string::npos ? 0 : bol + 1));
      CHECK(line.find("case '") != std::string::npos);
      CHECK(line.find("case '") == line.rfind("case '"));
    }
  }
  CHECK(run_cli("backend-diff --b gpu " + std::string(DSA_SOURCE_DIR) + "/golden/quant_subnormal.h5", &out) == 2);
  CHECK(out.find("expected cpu, cpu:THREADS, cuda") != std::string::npos);
}

TEST_CASE("table: row-tiled stages (Stage::tiling) have one bounded output and no whole-tensor sanity rule") {
  int tiled = 0;
  for (const Stage& st : stages()) {
    if (!st.tiling) continue;
    CAPTURE(st.name);
    ++tiled;
    REQUIRE(st.schema.outputs.size() == 1);
    CHECK(st.schema.outputs[0].tensor.name == st.tiling->tensor);
    CHECK(st.schema.outputs[0].compare == CompareKind::bounded);
    CHECK_FALSE(st.schema.outputs[0].positive);  // (B5 is whole-tensor; the streamed path merges only B6 rows)
    CHECK_FALSE(static_cast<bool>(st.sanity));
    CHECK(static_cast<bool>(st.tiling->align));
    // Every row tile of every selftest case equals the same rows of the whole reference, bit for bit.
    for (const auto& spec : st.selftest) {
      const Case c = golden::make_case(spec, 77, 2);
      CAPTURE(c.name);
      BoundCase b;
      REQUIRE(validate_case(c, false, &b).empty());
      const Expected whole = run_reference(b);
      const RefTensor& w = *whole.find(st.tiling->tensor);
      const std::int64_t R = w.value.dim(0), per = R ? w.value.numel() / R : 0, al = st.tiling->align(c, *b.params);
      for (std::int64_t r0 = 0; r0 < R; r0 += 2 * al) {
        RefOptions ro;
        ro.row_begin = r0;
        ro.row_end = std::min(R, r0 + 2 * al);
        const Expected t = run_reference(b, ro);
        const RefTensor& x = *t.find(st.tiling->tensor);
        CHECK(x.flat_offset == r0 * per);
        CHECK(x.value.same_bytes(w.value.slice0(r0, ro.row_end)));
        CHECK(x.magnitude.same_bytes(w.magnitude.slice0(r0, ro.row_end)));
        CHECK(x.defined.same_bytes(w.defined.slice0(r0, ro.row_end)));
        CHECK(x.describe(r0 * per) == w.describe(r0 * per));
      }
    }
  }
  CHECK(tiled == 2);  // indexer.logits_ragged, indexer.logits_paged
}

TEST_CASE("backend-diff: CPU vs CUDA identical where a stage has a CUDA implementation (skipped without a device)") {
  if (const std::string why = cuda::device_problem(); !why.empty()) {
    MESSAGE("skipped: " << why);
    std::printf("skipped: CPU vs CUDA backend-diff (%s)\n", why.c_str());
    return;
  }
  const pipeline::Impl cpu{Backend::cpu, 0}, gpu{Backend::cuda, 0};
  int n = 0;
  for (const Stage& st : stages()) {
    if (!st.impl_for(Backend::cuda)) continue;
    for (const auto* specs : {&st.goldens, &st.selftest})
      for (const auto& spec : *specs) {
        if (!spec.committed) continue;
        for (std::uint64_t seed : {1u, 2u, 3u}) {
          const Case c = golden::make_case(spec, seed, 0);
          const auto d = pipeline::diff_references(c, cpu, gpu);
          INFO(spec.name << " seed " << seed << (d.empty() ? "" : ": " + d[0].tensor + ": " + d[0].message));
          CHECK(d.empty());
          ++n;
        }
      }
  }
  CHECK(n > 0);
}

TEST_CASE("--backend cuda without a usable device is exit 2 with the reason") {
  if (cuda::device_problem().empty()) return;  // a device is there: the test above ran
  std::string out;
  CHECK(run_cli("check --backend cuda " + std::string(DSA_SOURCE_DIR) + "/golden/quant_subnormal.h5", &out) == 2);
  CHECK(out.find("--backend cuda: ") != std::string::npos);
  CHECK(run_cli("selftest --backend cuda", &out) == 2);
  CHECK(out.find("--backend cuda: ") != std::string::npos);
}

TEST_CASE("selftest --backend cuda: the stages with a CUDA implementation, every base passes and every mutant is caught") {
  if (const std::string why = cuda::device_problem(); !why.empty()) {
    MESSAGE("skipped: " << why);
    std::printf("skipped: selftest --backend cuda (%s)\n", why.c_str());
    return;
  }
  std::string out;
  CHECK(run_cli("selftest --backend cuda", &out) == 0);
  INFO(out);
  CHECK(out.find("(backend cuda") != std::string::npos);
  CHECK(out.find("(100.0 %)") != std::string::npos);
  CHECK(out.find("base 'ragged' (indexer.logits_ragged)") != std::string::npos);
}

TEST_CASE("DSA_CUDA_POISON: poison-filled device buffers change no byte - a bad value is exit 2 naming the variable") {
  if (const std::string why = cuda::device_problem(); !why.empty()) {
    MESSAGE("skipped: " << why);
    std::printf("skipped: DSA_CUDA_POISON (%s)\n", why.c_str());
    return;
  }
  // The children inherit the variable; one golden of a logits stage, the top-k and sparse attention.
  const std::string files = std::string(" ") + DSA_SOURCE_DIR + "/golden/paged_mtp_n2_2d.h5 " + DSA_SOURCE_DIR +
                            "/golden/topk_ties_at_kth.h5 " + DSA_SOURCE_DIR + "/golden/mla_decode_v32_mtp.h5";
  std::string out;
  for (const char* pat : {"ff", "5a", "0"}) {
    ::setenv("DSA_CUDA_POISON", pat, 1);
    const int rc = run_cli("backend-diff --a cpu --b cuda" + files, &out);
    INFO(pat << ": " << out);
    CHECK(rc == 0);
    CHECK(out.find("3 identical, 0 different") != std::string::npos);
  }
  for (const char* bad : {"zz", "100", "fff", "0x1"}) {
    ::setenv("DSA_CUDA_POISON", bad, 1);
    const int rc = run_cli("backend-diff --a cpu --b cuda" + files, &out);
    INFO(bad << ": " << out);
    CHECK(rc == 2);
    CHECK(out.find(std::string("DSA_CUDA_POISON: expected one byte in hex (00..ff), found '") + bad + "'") != std::string::npos);
  }
  ::unsetenv("DSA_CUDA_POISON");
}
