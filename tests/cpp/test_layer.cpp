// Layer dumps (issue #17): links between the cases of one file (HDF5 hard/soft links, attr from:), the chained check
// (local and end-to-end verdicts, first divergence), the committed layer golden and the layer selftest.
#include <doctest/doctest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "compare/compare.hpp"
#include "io/h5io.hpp"
#include "pipeline/catalogue.hpp"
#include "pipeline/check.hpp"
#include "pipeline/layer.hpp"
#include "pipeline/layers.hpp"
#include "pipeline/load.hpp"
#include "stage/mutant_kit.hpp"

using namespace dsa;
namespace fs = std::filesystem;

namespace {

struct LayerTmp {
  fs::path path;
  LayerTmp() {
    std::string t = (fs::temp_directory_path() / "dsa-layer-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~LayerTmp() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

const std::vector<Case>& layer_members() {
  static const std::vector<Case> m = golden::make_layer(*golden::find_layer_spec("layer_v32_decode"), std::nullopt, 2);
  return m;
}

// The members as a kernel dump: outputs = the reference, no expected/, links naming outputs.
std::vector<Case> as_dump(std::vector<Case> cs) {
  for (auto& c : cs) {
    c.outputs = c.expected;
    c.expected.clear();
    for (auto& [in, src] : c.links) src.replace(src.find("/expected/"), 10, "/outputs/");
  }
  return cs;
}

pipeline::RunOptions opts(const std::string& f) {
  pipeline::RunOptions o;
  o.files = {f};
  return o;
}

const Case& member(const std::vector<Case>& cs, const std::string& name) {
  for (const auto& c : cs)
    if (c.name == name) return c;
  FAIL("no member " << name);
  return cs.front();
}

}  // namespace

TEST_CASE("layer: the writer stores same-shape links as HDF5 hard links and the reader recovers every link") {
  LayerTmp d;
  io::write_file(d / "l.h5", layer_members());
  const auto rr = pipeline::load_file(d / "l.h5");
  REQUIRE(rr.problems.empty());
  const Case& logits = member(rr.cases, "idx_logits");
  CHECK(logits.links.at("kv_cache") == "idx_kcache_store/expected/kv_cache");
  // Read once: the input shares the source's storage.
  CHECK(logits.input("kv_cache").raw() == member(rr.cases, "idx_kcache_store").expected.at("kv_cache").raw());
  const Case& attn = member(rr.cases, "sparse_mla_decode");
  CHECK(attn.links.at("indices") == "idx_topk/expected/indices");  // [6, 64] read as [3, 2, 64]: attr from:, bytes stored
  CHECK(attn.input("indices").shape() == Shape{3, 2, 64});
  CHECK(!attn.has_attr("from:indices"));
  // Same-shape links are hard links (one object), a reshaped one is its own dataset.
  hid_t f = H5Fopen((d / "l.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  REQUIRE(f >= 0);
  H5O_info_t a, b;
  REQUIRE(H5Oget_info_by_name(f, "/idx_logits/inputs/kv_cache", &a, H5P_DEFAULT) >= 0);
  REQUIRE(H5Oget_info_by_name(f, "/idx_kcache_store/expected/kv_cache", &b, H5P_DEFAULT) >= 0);
  CHECK(a.addr == b.addr);
  REQUIRE(H5Oget_info_by_name(f, "/sparse_mla_decode/inputs/indices", &a, H5P_DEFAULT) >= 0);
  REQUIRE(H5Oget_info_by_name(f, "/idx_topk/expected/indices", &b, H5P_DEFAULT) >= 0);
  CHECK(a.addr != b.addr);
  H5Fclose(f);
  // One member written alone (`cut`): its links to cases not written are dropped, the file stands alone.
  io::write_file(d / "one.h5", {member(layer_members(), "sparse_mla_decode")});
  const auto one = pipeline::load_file(d / "one.h5");
  CHECK(one.problems.empty());
  REQUIRE(one.cases.size() == 1);
  CHECK(one.cases[0].links.empty());
}

TEST_CASE("layer: attr from: fills an absent input - a soft link is a link - bad links are input problems naming both ends") {
  LayerTmp d;
  std::vector<Case> cs = layer_members();
  Case& topk = cs[2];
  REQUIRE(topk.name == "idx_topk");
  SUBCASE("absent input filled from the attr") {
    topk.inputs.erase("logits");
    topk.links.clear();
    io::write_file(d / "a.h5", cs);
    hid_t f = H5Fopen((d / "a.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(f, "/idx_topk", H5P_DEFAULT);
    hid_t st = H5Tcopy(H5T_C_S1);
    H5Tset_size(st, H5T_VARIABLE);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t at = H5Acreate2(g, "from:logits", st, sp, H5P_DEFAULT, H5P_DEFAULT);
    const char* v = "idx_logits/expected/logits";
    H5Awrite(at, st, &v);
    H5Aclose(at), H5Sclose(sp), H5Tclose(st), H5Gclose(g), H5Fclose(f);
    const auto rr = pipeline::load_file(d / "a.h5");
    CHECK(rr.problems.empty());
    const Case& t = member(rr.cases, "idx_topk");
    CHECK(t.links.at("logits") == "idx_logits/expected/logits");
    CHECK(t.input("logits").same_bytes(member(rr.cases, "idx_logits").expected.at("logits")));
  }
  SUBCASE("soft link") {
    topk.links.clear();
    topk.inputs.erase("logits");
    io::write_file(d / "s.h5", cs);
    hid_t f = H5Fopen((d / "s.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(H5Lcreate_soft("/idx_logits/expected/logits", f, "/idx_topk/inputs/logits", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    const auto rr = pipeline::load_file(d / "s.h5");
    CHECK(rr.problems.empty());
    CHECK(member(rr.cases, "idx_topk").links.at("logits") == "idx_logits/expected/logits");
  }
  SUBCASE("stored input differing from its named source") {
    Tensor other = topk.inputs.at("logits").clone();
    other.set_value(0, 12345.0);
    topk.inputs["logits"] = other;
    io::write_file(d / "b.h5", cs);  // not a hard link (other bytes): written whole with attr from:
    const auto rr = pipeline::load_file(d / "b.h5");
    REQUIRE(rr.problems.size() == 1);
    CHECK(rr.problems[0].case_name == "idx_topk");
    CHECK(rr.problems[0].tensor == "attr from:logits");
    CHECK(rr.problems[0].found.find("other bytes") != std::string::npos);
  }
  SUBCASE("unknown case, bad group, own output") {
    // The writer keeps only links whose source it writes: bad attrs are set on the written file directly.
    io::write_file(d / "c.h5", cs);
    hid_t f = H5Fopen((d / "c.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    auto set = [&](const char* group, const char* name, const char* value) {
      hid_t g = H5Gopen2(f, group, H5P_DEFAULT);
      hid_t st = H5Tcopy(H5T_C_S1);
      H5Tset_size(st, H5T_VARIABLE);
      hid_t sp = H5Screate(H5S_SCALAR);
      if (H5Aexists(g, name) > 0) H5Adelete(g, name);
      hid_t at = H5Acreate2(g, name, st, sp, H5P_DEFAULT, H5P_DEFAULT);
      H5Awrite(at, st, &value);
      H5Aclose(at), H5Sclose(sp), H5Tclose(st), H5Gclose(g);
    };
    REQUIRE(H5Ldelete(f, "/idx_topk/inputs/logits", H5P_DEFAULT) >= 0);
    set("/idx_topk", "from:logits", "nope/outputs/logits");
    set("/sparse_mla_decode", "from:q", "sparse_mla_decode/expected/out");
    set("/idx_kcache_store", "from:kv_cache_in", "mla_kcache_store/inputs/kv_cache_in");
    H5Fclose(f);
    const auto rr = pipeline::load_file(d / "c.h5");
    std::string all;
    for (const auto& p : rr.problems) all += p.str() + "\n";
    CHECK(all.find("a case of this file (idx_kcache_store, idx_logits, idx_topk, mla_kcache_store, sparse_mla_decode)") != std::string::npos);
    CHECK(all.find("a source in outputs/ or expected/ of another case") != std::string::npos);
    CHECK(all.find("a case's input cannot be its own output") != std::string::npos);
  }
  SUBCASE("a cycle of hard links") {
    io::write_file(d / "y.h5", cs);
    hid_t f = H5Fopen((d / "y.h5").c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(H5Ldelete(f, "/idx_kcache_store/inputs/kv_cache_in", H5P_DEFAULT) >= 0);
    REQUIRE(H5Lcreate_hard(f, "/idx_logits/expected/logits", f, "/idx_kcache_store/inputs/kv_cache_in", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    const auto rr = pipeline::load_file(d / "y.h5");
    std::string all;
    for (const auto& p : rr.problems) all += p.str() + "\n";
    CHECK(all.find("a cycle of links: ") != std::string::npos);
  }
}

TEST_CASE("layer: a clean layer dump checks clean, local and end to end, as one block in pipeline order") {
  LayerTmp d;
  auto cs = as_dump(layer_members());
  io::write_file(d / "l.h5", cs);
  const auto rep = pipeline::run_checks(opts(d / "l.h5"));
  REQUIRE(rep.problems.empty());
  CHECK(rep.exit_code() == 0);
  std::vector<std::string> order;
  std::int64_t informational = 0;
  for (const auto& r : rep.results) {
    CHECK(r.layer == "layer_v32_decode");
    if (order.empty() || order.back() != r.stage) order.push_back(r.stage);
    informational += r.informational ? 1 : 0;
    CHECK(cmp::verdict_pass(r.verdict));
  }
  CHECK(order == std::vector<std::string>{"indexer.kcache_store", "indexer.logits_paged", "indexer.topk", "mla.kcache_store", "attn.sparse_mla_decode"});
  CHECK(informational == 6);
  REQUIRE(rep.divergences.size() == 1);
  CHECK(rep.divergences[0].find("no divergence: all 5 cases pass locally") != std::string::npos);
}

TEST_CASE("layer: a fault at the logits is the first divergence - the top-k below it passes locally and drifts end to end") {
  LayerTmp d;
  auto cs = as_dump(layer_members());
  // The logits kernel drops the ReLU (B4) in one row: the top-k kernel, fed those logits, selects correctly from them.
  Case& lg = cs[1];
  REQUIRE(lg.name == "idx_logits");
  std::vector<Expected> refs;
  golden::make_layer(*golden::find_layer_spec("layer_v32_decode"), std::nullopt, 2, Backend::cpu, &refs);
  const Mutant* m = nullptr;
  for (const auto& x : find_stage("indexer.logits_paged")->mutants)
    if (x.name == "paged_relu_missing") m = &x;
  REQUIRE(m);
  for (auto& [n, t] : lg.outputs) t = t.clone();
  m->apply(lg, refs[1], 7);
  // The top-k "kernel": the reference top-k of the faulty logits.
  Case& tk = cs[2];
  tk.inputs["logits"] = lg.outputs.at("logits");
  tk.outputs = {{"indices", run_reference(tk).tensors.front().value}};
  Case& at = cs[4];  // attention, fed that top-k, computes correctly from it
  at.inputs["indices"] = tk.outputs.at("indices").reshape(at.inputs.at("indices").shape());
  for (const auto& t : run_reference(at).tensors) at.outputs[t.name] = t.value;
  io::write_file(d / "f.h5", cs);
  const auto rep = pipeline::run_checks(opts(d / "f.h5"));
  REQUIRE(rep.problems.empty());
  CHECK(rep.exit_code() == 1);
  bool topk_local_pass = false, topk_e2e_fail = false;
  for (const auto& r : rep.results)
    if (r.case_name == "idx_topk") (r.informational ? topk_e2e_fail : topk_local_pass) = r.informational ? !cmp::verdict_pass(r.verdict) : r.pass();
  CHECK(topk_local_pass);
  CHECK(topk_e2e_fail);
  REQUIRE(rep.divergences.size() == 1);
  CHECK(rep.divergences[0].find("first divergence: indexer.logits_paged (case 'idx_logits', local FAIL)") != std::string::npos);
  CHECK_MESSAGE(rep.divergences[0].find("end to end below it: indexer.topk FAIL, attn.sparse_mla_decode FAIL") != std::string::npos, rep.divergences[0]);
  // A saved report merges back to the same divergence (layer fields in the JSON).
  pipeline::RunOptions o = opts(d / "f.h5");
  o.json_path = d / "r.json";
  std::ostringstream out, err;
  CHECK(pipeline::run_check_command(o, out, err) == 1);
  CHECK(out.str().find("layer layer_v32_decode (" + d / "f.h5" + "): indexer.kcache_store -> indexer.logits_paged") != std::string::npos);
  std::vector<std::string> errors;
  const auto merged = pipeline::merge_reports({d / "r.json"}, errors);
  CHECK(errors.empty());
  CHECK(merged.divergences == rep.divergences);
  CHECK(merged.exit_code() == 1);
}

TEST_CASE("layer: top-k swaps inside the band pass and attention is judged end to end on the kernel's own selection") {
  LayerTmp d;
  auto cs = as_dump(layer_members());
  std::vector<Expected> refs;
  golden::make_layer(*golden::find_layer_spec("layer_v32_decode"), std::nullopt, 2, Backend::cpu, &refs);
  // Plausible top-k: in-band swaps where the band allows; attention recomputed on those indices.
  Case& tk = cs[2];
  bool swapped = false;
  for (std::uint64_t seed = 1; seed < 64 && !swapped; ++seed) {
    Case t = tk;
    mutant::plausible_outputs(t, refs[2], seed);
    swapped = !t.outputs.at("indices").same_bytes(tk.outputs.at("indices"));
    if (swapped) tk = t;
  }
  REQUIRE(swapped);
  Case& at = cs[4];
  at.inputs["indices"] = tk.outputs.at("indices").reshape(at.inputs.at("indices").shape());
  Expected ea = run_reference(at);
  for (const auto& t : ea.tensors) at.outputs[t.name] = t.value;
  io::write_file(d / "s.h5", cs);
  const auto rep = pipeline::run_checks(opts(d / "s.h5"));
  REQUIRE(rep.problems.empty());
  CHECK(rep.exit_code() == 0);
  bool own = false;
  for (const auto& r : rep.results)
    if (r.case_name == "sparse_mla_decode" && r.informational) {
      CHECK(r.verdict == cmp::Verdict::BITEXACT);
      for (const auto& n : r.notes) own = own || n.find("on idx_topk's own selection") != std::string::npos;
    }
  CHECK(own);
  CHECK(rep.divergences[0].find("no divergence") != std::string::npos);
}

TEST_CASE("layer: selftest attributes every applicable mutant to its stage") {
#ifdef DSA_TESTS_SANITIZED
  // Under ASan / UBSan the selftest test runs the layer attribution (run_selftest, seed 1); this release-only repeat
  // adds the attribution counts.
  MESSAGE("layer attribution: run by the selftest test in the sanitizer build");
  return;
#endif
  std::ostringstream out;
  CHECK(golden::layer_selftest(out, 2, Backend::cpu, false));
  // layer_v32_decode: the applicable mutants of its members (issue #34: the vllm-torch paged mutants, the kcache
  // scale-rule mutants, the sparse MLA systematic-error mutants)
  CHECK(out.str().find("attribution 27/27 mutants (100.0 %)") != std::string::npos);
}

TEST_CASE("check --invariance: a request that passes alone and fails in a batch is a FAIL - nothing repeated is an ERROR") {
  LayerTmp d;
  Expected E;
  Case base = golden::make_case(*golden::find_spec("topk_ties_at_kth"), std::nullopt, 2, &E);
  base.outputs["indices"] = base.expected.at("indices");
  base.expected.clear();
  Case alone = base, batch = base;
  alone.name = "alone";
  batch.name = "batch";
  alone.attrs["request_ids"] = std::vector<std::int64_t>{7};
  batch.attrs["request_ids"] = std::vector<std::int64_t>{7, 8};
  io::write_file(d / "a.h5", {alone});
  io::write_file(d / "b.h5", {batch});
  pipeline::RunOptions o;
  o.files = {d / "a.h5", d / "b.h5"};
  o.check.invariance = true;
  auto inv = [](const pipeline::RunOptions& ro) {
    std::vector<cmp::CheckResult> v;
    for (const auto& r : pipeline::run_checks(ro).results)
      if (r.group == "invariance") v.push_back(r);
    return v;
  };
  auto v = inv(o);
  REQUIRE(v.size() == 1);
  CHECK(v[0].verdict == cmp::Verdict::BITEXACT);
  CHECK(v[0].message == "same verdict for each of 1 request(s) repeated across cases");
  // The batched call's kernel drops a selection (B12-like padding): the same request now fails there only.
  Tensor bad = batch.outputs.at("indices").clone();
  bad.set_value(0, -1);
  batch.outputs["indices"] = bad;
  io::write_file(d / "b.h5", {batch});
  v = inv(o);
  REQUIRE(v.size() == 1);
  CHECK(v[0].verdict == cmp::Verdict::FAIL);
  CHECK(v[0].message.find("request 7 passes in case 'alone' (" + d / "a.h5" + ") but fails in case 'batch'") != std::string::npos);
  // No provenance: nothing to compare is an error, not a pass.
  alone.attrs.erase("request_ids");
  io::write_file(d / "a.h5", {alone});
  o.files = {d / "a.h5"};
  v = inv(o);
  REQUIRE(v.size() == 1);
  CHECK(v[0].verdict == cmp::Verdict::ERROR);
  CHECK(v[0].message.find("--invariance: no request appears in two cases") == 0);
}

TEST_CASE("check --backend cuda: a stage without a CUDA implementation runs on the CPU and every result says so") {
  const auto rr = pipeline::load_file(std::string(DSA_SOURCE_DIR) + "/golden/layer_v32_decode.h5");
  REQUIRE(rr.problems.empty());
  pipeline::CheckOptions o;
  o.backend = Backend::cuda;
  for (const auto& c : rr.cases) {
    BoundCase b;
    REQUIRE(validate_case(c, true, &b).empty());
    const bool has_cuda = b.stage->impl_for(Backend::cuda) != nullptr;
    CHECK(pipeline::reference_backend(b, o) == (has_cuda ? Backend::cuda : Backend::cpu));
    if (has_cuda) continue;  // would need a device
    for (const auto& r : pipeline::check_case(b, o)) {
      CHECK(r.verdict == cmp::Verdict::BITEXACT);
      CHECK(r.notes.back() == "reference on the cpu: stage " + c.stage + " has no cuda implementation (every backend gives the same bytes)");
    }
  }
}
