// Bad-input suite: drives the real CLI binary (DSA_CHECK_BIN: in the ASan build it is the ASan binary) on
// broken files. Every case: exit code 2 (not a crash, not 1), one `error: ...` line per problem naming file,
// case, tensor, expected and found, and for `cut` no output file. Files are made with our writer and then
// broken with the HDF5 C API. Test names: badinput.*
#include <doctest/doctest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/h5io.hpp"

using namespace dsa;
namespace fs = std::filesystem;

namespace {

struct BadTmpDir {
  fs::path path;
  BadTmpDir() {
    std::string t = (fs::temp_directory_path() / "dsa-bad-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~BadTmpDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& f) const { return (path / f).string(); }
};

// The CLI of this very build (the ASan one in the ASan run), even when the environment's DSA_CHECK_BIN names
// another build (scripts/test.sh exports the release binary for pytest); the environment only fills in when
// the compiled-in path is gone.
std::string cli_bin() {
  if (fs::exists(DSA_CHECK_BIN)) return DSA_CHECK_BIN;
  const char* e = std::getenv("DSA_CHECK_BIN");
  return e && *e ? std::string(e) : std::string(DSA_CHECK_BIN);
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Run {
  int rc = -1;
  std::string out, err;
  std::vector<std::string> error_lines() const {
    std::vector<std::string> v;
    std::istringstream s(err);
    for (std::string l; std::getline(s, l);)
      if (l.rfind("error: ", 0) == 0) v.push_back(l);
    return v;
  }
};

std::string q(const std::string& s) { return "'" + s + "'"; }

// Runs dsa-check with args (already shell-quoted); a crash (signal) fails the test.
Run run_cli(const BadTmpDir& d, const std::string& args) {
  const std::string o = d / ".stdout", e = d / ".stderr";
  const std::string cmd = q(cli_bin()) + " " + args + " >" + q(o) + " 2>" + q(e);
  const int st = std::system(cmd.c_str());
  Run r;
  r.out = slurp(o);
  r.err = slurp(e);
  fs::remove(o);
  fs::remove(e);
  INFO("command: " << cmd << "\nstderr:\n" << r.err);
  REQUIRE_MESSAGE(WIFEXITED(st), "dsa-check did not exit normally (crash?)");
  r.rc = WEXITSTATUS(st);
  return r;
}

// Expect exit 2 and an error line containing every fragment, and nothing but clean lines.
void expect_problem(const Run& r, const std::vector<std::string>& fragments) {
  INFO("stderr:\n" << r.err);
  CHECK(r.rc == 2);
  const auto lines = r.error_lines();
  CHECK_FALSE(lines.empty());
  bool found = false;
  for (const auto& l : lines) {
    bool all = true;
    for (const auto& f : fragments) all = all && l.find(f) != std::string::npos;
    found = found || all;
  }
  CHECK_MESSAGE(found, "no error line contains all of the expected fragments");
  CHECK(r.err.find("terminate") == std::string::npos);
  CHECK(r.err.find("AddressSanitizer") == std::string::npos);
  CHECK(r.err.find("HDF5-DIAG") == std::string::npos);  // no raw HDF5 error stack
}

Tensor bf16_tensor(Shape s) {
  Tensor t(DType::bf16, std::move(s));
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_value(i, static_cast<double>(i % 11) * 0.5 - 2.0);
  return t;
}

Case quant_case(const std::string& name) {
  Case c;
  c.name = name;
  c.stage = "indexer.quant";
  c.inputs["x"] = bf16_tensor({2, 128});
  c.outputs["y"] = Tensor(DType::fp8_e4m3fn, {2, 128});
  c.outputs["scale"] = Tensor(DType::f32, {2, 1}).full(1.0);
  return c;
}

Case ragged_case(const std::string& name, std::int64_t S, std::int64_t S_weights) {
  Case c;
  c.name = name;
  c.stage = "indexer.logits_ragged";
  c.inputs["q"] = Tensor(DType::fp8_e4m3fn, {S, 4, 128});
  c.inputs["kv"] = Tensor(DType::fp8_e4m3fn, {8, 128});
  c.inputs["kv_scale"] = Tensor(DType::f32, {8}).full(1.0);
  c.inputs["weights"] = Tensor(DType::f32, {S_weights, 4});
  c.inputs["ks"] = Tensor(DType::i32, {S});
  c.inputs["ke"] = Tensor(DType::i32, {S}).full(8.0);
  return c;
}

// Opens a file read-write for the duration of one mutation.
struct H5Edit {
  hid_t f;
  explicit H5Edit(const std::string& p) : f(H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT)) { REQUIRE(f >= 0); }
  ~H5Edit() { H5Fclose(f); }
  void set_str_attr(const std::string& obj, const std::string& name, const std::string& v) {
    if (H5Aexists_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT) > 0)
      H5Adelete_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, v.size() + 1);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate_by_name(f, obj.c_str(), name.c_str(), t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    REQUIRE(H5Awrite(a, t, v.c_str()) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
    H5Tclose(t);
  }
  void set_int_attr(const std::string& obj, const std::string& name, std::int64_t v) {
    if (H5Aexists_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT) > 0)
      H5Adelete_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate_by_name(f, obj.c_str(), name.c_str(), H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    REQUIRE(H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0);
    H5Aclose(a);
    H5Sclose(sp);
  }
  void set_null_attr(const std::string& obj, const std::string& name) {  // h5py.Empty: no value at all
    hid_t sp = H5Screate(H5S_NULL);
    hid_t a = H5Acreate_by_name(f, obj.c_str(), name.c_str(), H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    H5Aclose(a);
    H5Sclose(sp);
  }
  void delete_attr(const std::string& obj, const std::string& name) {
    REQUIRE(H5Adelete_by_name(f, obj.c_str(), name.c_str(), H5P_DEFAULT) >= 0);
  }
  // Replaces (or creates) dataset `path` with an uninitialised one of `type` and `dims` (chunked when asked).
  void make_dataset(const std::string& path, hid_t type, const std::vector<hsize_t>& dims, bool chunked = false) {
    if (H5Lexists(f, path.c_str(), H5P_DEFAULT) > 0) H5Ldelete(f, path.c_str(), H5P_DEFAULT);
    hid_t sp = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    REQUIRE(sp >= 0);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
      std::vector<hsize_t> ch(dims.size(), 1);
      H5Pset_chunk(dcpl, static_cast<int>(ch.size()), ch.data());
    }
    hid_t ds = H5Dcreate2(f, path.c_str(), type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(ds >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
  }
};

}  // namespace

TEST_CASE("badinput.missing file - directory - not HDF5 - truncated HDF5") {
  BadTmpDir d;
  expect_problem(run_cli(d, "inspect " + q(d / "nope.h5")), {d / "nope.h5", "expected an existing file", "found no such file"});
  expect_problem(run_cli(d, "inspect " + q(d.path.string())), {d.path.string(), "expected an HDF5 file", "found a directory"});
  {
    std::ofstream(d / "text.h5") << "not an HDF5 file\n";
  }
  expect_problem(run_cli(d, "inspect " + q(d / "text.h5")), {d / "text.h5", "expected an HDF5 file", "found not HDF5"});
  // Truncated: the first half of a real file (ours if the shared data is absent).
  const char* e = std::getenv("DSA_SHARED_DIR");
  std::string src = (e && *e ? std::string(e) : std::string(DSA_SHARED_DIR)) + "/data/deepgemm_sm90_logits.h5";
  if (!fs::exists(src)) {
    Case big = quant_case("big");
    big.inputs["x"] = bf16_tensor({512, 1024});
    src = d / "big.h5";
    io::write_file(src, {big});
  }
  {
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(d / "half.h5", std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  expect_problem(run_cli(d, "inspect " + q(d / "half.h5")), {d / "half.h5", "expected a readable HDF5 file", "truncated"});
  // Several files: every one is reported, exit 2.
  const Run r = run_cli(d, "inspect " + q(d / "nope.h5") + " " + q(d / "text.h5"));
  CHECK(r.rc == 2);
  CHECK(r.error_lines().size() == 2);
}

TEST_CASE("badinput.dtype attr missing - unknown - or not matching the storage") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.delete_attr("/c0/inputs/x", "dtype");
  }
  expect_problem(run_cli(d, "inspect " + q(p)),
                 {p, "case 'c0'", "inputs/x", "expected dtype bf16 or float32", "found uint16", "dtype attribute"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.set_str_attr("/c0/inputs/x", "dtype", "bfloat17");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "inputs/x", "expected dtype attr one of", "found 'bfloat17'"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.make_dataset("/c0/inputs/x", H5T_STD_U8LE, {2, 128});
    ed.set_str_attr("/c0/inputs/x", "dtype", "bf16");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "inputs/x", "expected storage for dtype bf16 (raw uint16 bits)", "found uint8"});
  // A float32 dataset that claims to be int32.
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.set_str_attr("/c0/outputs/scale", "dtype", "int32");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "outputs/scale", "expected storage for dtype int32", "found float32"});
}

TEST_CASE("badinput.wrong rank - inconsistent shapes - empty tensors - absurd dims") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  Case c = quant_case("rank");
  c.inputs["x"] = bf16_tensor({256});
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'rank'", "inputs/x", "expected rank 2 [T,K]", "found rank 1 [256]"});
  io::write_file(p, {ragged_case("shapes", 3, 5)});
  expect_problem(run_cli(d, "inspect " + q(p)),
                 {p, "case 'shapes'", "inputs/weights", "expected dim 0 = S = 3 (from inputs/", "found 5"});
  Case e = quant_case("empty");
  e.inputs["x"] = Tensor(DType::bf16, {0, 128});
  e.outputs.clear();
  io::write_file(p, {e});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'empty'", "inputs/x", "expected a non-empty tensor", "found shape [0, 128]"});
  // Dims whose product overflows 64 bits (HDF5 accepts them for a chunked dataset that is never written).
  io::write_file(p, {quant_case("huge")});
  {
    H5Edit ed(p);
    const hsize_t big = hsize_t{1} << 40;
    ed.make_dataset("/huge/inputs/x", H5T_STD_U16LE, {big, big}, true);
    ed.set_str_attr("/huge/inputs/x", "dtype", "bf16");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'huge'", "inputs/x", "expected a shape whose element count fits in 64 bits",
                                                 "found [1099511627776, 1099511627776]"});
  // Fits in 64 bits but is absurdly large: refused before allocating.
  io::write_file(p, {quant_case("large")});
  {
    H5Edit ed(p);
    ed.make_dataset("/large/inputs/x", H5T_STD_U16LE, {hsize_t{1} << 20, hsize_t{1} << 30}, true);
    ed.set_str_attr("/large/inputs/x", "dtype", "bf16");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'large'", "inputs/x", "expected at most", "bytes", "found [1048576, 1073741824] bf16"});
}

TEST_CASE("badinput.stage and schema_version attrs") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  Case c = quant_case("c0");
  c.stage = "indexer.bogus";
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr stage", "expected one of indexer.quant", "found 'indexer.bogus'"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.delete_attr("/c0", "stage");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr stage", "expected a string attribute naming the stage", "found none"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.set_int_attr("/c0", "schema_version", 2);
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr schema_version", "expected 1", "found 2"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.delete_attr("/c0", "schema_version");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr schema_version", "expected 1", "found none"});
}

TEST_CASE("badinput.unknown tensor - bad attr type - attr value not in choices") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  Case c = quant_case("c0");
  c.inputs["x_extra"] = bf16_tensor({2, 128});
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "inputs/x_extra", "expected one of the stage's tensors (x)", "found an unknown tensor"});
  c = quant_case("c0");
  c.attrs["block_size"] = std::string("big");
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr block_size", "expected int", "found \"big\""});
  c = quant_case("c0");
  c.attrs["scale_fmt"] = std::string("ue9m0");
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr scale_fmt", "expected one of ue8m0|pow2|fp32_div|fp32_mul|bf16_div|bf16_mul|amax448|amax448_eps|flt_min", "found 'ue9m0'"});
  c = quant_case("c0");
  c.attrs["clamp"] = std::int64_t{2};
  io::write_file(p, {c});
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr clamp", "expected bool", "found 2"});
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.set_null_attr("/c0", "block_size");
  }
  expect_problem(run_cli(d, "inspect " + q(p)), {p, "case 'c0'", "attr block_size", "expected an integer, float or string attribute",
                                                 "found an empty attribute"});
}

TEST_CASE("badinput.dataset where a case group should be - group where a tensor should be") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  io::write_file(p, {quant_case("c0")});
  {
    H5Edit ed(p);
    ed.make_dataset("/stray", H5T_STD_I32LE, {4});
    hid_t g = H5Gcreate2(ed.f, "/c0/inputs/sub", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(g >= 0);
    H5Gclose(g);
  }
  const Run r = run_cli(d, "inspect " + q(p));
  expect_problem(r, {p, "/stray", "expected case groups only at the top level", "found a dataset"});
  expect_problem(r, {p, "case 'c0'", "inputs/sub", "expected a dataset", "found a group"});
  CHECK(r.error_lines().size() == 2);  // every problem of the file, once each
}

TEST_CASE("badinput.all problems of a file at once - one line each") {
  BadTmpDir d;
  const std::string p = d / "a.h5";
  Case a = quant_case("a");
  a.attrs["scale_fmt"] = std::string("nope");
  Case b = ragged_case("b", 3, 5);
  Case ok = quant_case("ok");
  io::write_file(p, {a, b, ok});
  {
    H5Edit ed(p);
    ed.delete_attr("/a/inputs/x", "dtype");
  }
  const Run r = run_cli(d, "inspect " + q(p));
  CHECK(r.rc == 2);
  const auto lines = r.error_lines();
  CHECK(lines.size() == 3);
  for (const auto& l : lines) CHECK(l.find(p + ": case '") != std::string::npos);
  CHECK(r.out.find("3 problem(s)") != std::string::npos);
}

TEST_CASE("badinput.cut refuses bad input and never leaves a partial file") {
  BadTmpDir d;
  const std::string p = d / "in.h5";
  Case bad = quant_case("bad_one");
  bad.attrs["scale_fmt"] = std::string("nope");
  io::write_file(p, {quant_case("good_1"), quant_case("good_2"), bad});
  const std::string out = d / "out.h5";
  // Selected case invalid.
  expect_problem(run_cli(d, "cut " + q(p) + " --case 'bad*' --out " + q(out)), {p, "case 'bad_one'", "attr scale_fmt", "found 'nope'"});
  CHECK_FALSE(fs::exists(out));
  // Pattern without a match.
  expect_problem(run_cli(d, "cut " + q(p) + " --case 'zzz*' --out " + q(out)), {p, "--case 'zzz*'", "expected a pattern matching a case", "found no match"});
  CHECK_FALSE(fs::exists(out));
  // Unwritable --out: missing directory, a directory, the input itself.
  expect_problem(run_cli(d, "cut " + q(p) + " --case good_1 --out " + q(d / "no/dir/out.h5")), {d / "no/dir/out.h5", "--out", "expected a file in an existing directory"});
  expect_problem(run_cli(d, "cut " + q(p) + " --case good_1 --out " + q(d.path.string())), {"--out", "expected a file path", "found a directory"});
  expect_problem(run_cli(d, "cut " + q(p) + " --case good_1 --out " + q(p)), {"--out", "expected a path other than the input file"});
  // Missing input file.
  expect_problem(run_cli(d, "cut " + q(d / "missing.h5") + " --case x --out " + q(out)), {d / "missing.h5", "found no such file"});
  CHECK_FALSE(fs::exists(out));
  // Only our files are left in the directory: no temp files.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(d.path)) names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"in.h5"});
  // Usage error: --out missing.
  CHECK(run_cli(d, "cut " + q(p) + " --case good_1").rc == 2);
}

TEST_CASE("badinput.cut copies the selected cases exactly") {
  BadTmpDir d;
  const std::string p = d / "in.h5";
  Case g1 = quant_case("good_1");
  g1.attrs["note"] = std::string("keep me");
  Case bad = quant_case("bad_one");
  bad.attrs["scale_fmt"] = std::string("nope");  // invalid but not selected: does not block the cut
  io::write_file(p, {g1, quant_case("good_2"), quant_case("other"), bad});
  const std::string out = d / "out.h5";
  const Run r = run_cli(d, "cut " + q(p) + " --case 'good_*' other --out " + q(out));
  INFO(r.err);
  REQUIRE(r.rc == 0);
  io::ReadOptions opt;
  opt.apply_defaults = false;
  const auto a = io::read_file(p, opt), b = io::read_file(out, opt);
  REQUIRE(b.ok());
  REQUIRE(b.cases.size() == 3);
  for (const Case& cb : b.cases) {
    const Case* ca = nullptr;
    for (const Case& x : a.cases)
      if (x.name == cb.name) ca = &x;
    REQUIRE(ca != nullptr);
    CHECK(cb.stage == ca->stage);
    CHECK(cb.attrs == ca->attrs);  // no defaults added
    for (const auto& [k, t] : ca->inputs) CHECK(cb.inputs.at(k).same_bytes(t));
    for (const auto& [k, t] : ca->outputs) CHECK(cb.outputs.at(k).same_bytes(t));
  }
  CHECK(r.out.find("wrote 3 case(s)") != std::string::npos);
}
