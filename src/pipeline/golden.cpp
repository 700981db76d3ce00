// Golden generation: catalogue case -> generator -> stage reference -> HDF5 (inputs/ + expected/) + MANIFEST.
#include "pipeline/golden.hpp"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "io/cleanup.hpp"
#include "io/h5io.hpp"
#include "pipeline/catalogue.hpp"
#include "pipeline/layers.hpp"
#include "stage/mutant_kit.hpp"

namespace dsa::golden {

namespace fs = std::filesystem;

Case generate_inputs(const GoldenSpec& spec, std::optional<std::uint64_t> seed, int threads) {
  const Generator* g = find_generator(spec.generator);
  if (!g) throw std::runtime_error("golden case '" + spec.name + "': unknown generator '" + spec.generator + "'");
  const Stage* st = find_stage(spec.stage);
  if (!st) throw std::runtime_error("golden case '" + spec.name + "': unknown stage '" + spec.stage + "'");
  if (g->stage != spec.stage)
    throw std::runtime_error("golden case '" + spec.name + "': generator '" + g->name + "' makes " + g->stage + " inputs, not " + spec.stage);
  Case c;
  c.name = spec.name;
  c.stage = spec.stage;
  c.attrs = spec.attrs;
  apply_attr_defaults(c);  // every option is written explicitly
  const std::uint64_t sd = seed.value_or(spec.seed);
  try {
    g->fn(spec, sd, threads, c);
  } catch (const std::exception& e) {
    throw std::runtime_error("golden case '" + spec.name + "': generator '" + g->name + "' failed: " + e.what());
  }
  for (const auto& p : spec.poison) {
    auto it = c.inputs.find(p.tensor);
    if (it == c.inputs.end() || it->second.rank() == 0 || !dtype_is_float(it->second.dtype()))
      throw std::runtime_error("golden case '" + spec.name + "': poison: no float input '" + p.tensor + "'");
    Tensor t = it->second.clone();
    const std::int64_t rows = t.dim(0), per = rows ? t.numel() / rows : 0;
    if (p.row < 0 || p.row >= rows || p.elem < -1 || p.elem >= per)
      throw std::runtime_error("golden case '" + spec.name + "': poison: " + p.tensor + " row " + std::to_string(p.row) +
                               " elem " + std::to_string(p.elem) + " out of range");
    for (std::int64_t e = p.elem < 0 ? 0 : p.elem; e < (p.elem < 0 ? per : p.elem + 1); ++e) t.set_value(p.row * per + e, p.value);
    it->second = t;
  }
  c.attrs["golden_generator"] = AttrValue{g->name};
  c.attrs["golden_seed"] = AttrValue{std::to_string(sd)};  // string: seeds span the full uint64 range
  return c;
}

Case make_case(const GoldenSpec& spec, std::optional<std::uint64_t> seed, int threads, Expected* reference, Backend backend) {
  Case c = generate_inputs(spec, seed, threads);
  return with_reference(std::move(c), spec.name, threads, reference, backend);
}

Case with_reference(Case c, const std::string& what, int threads, Expected* reference, Backend backend) {
  GoldenSpec spec;
  spec.name = what;
  BoundCase b;
  if (auto p = validate_case(c, false, &b); !p.empty())
    throw std::runtime_error("golden case '" + spec.name + "': generated inputs do not fit the schema: " + p.front().str());
  RefOptions ro;
  ro.threads = threads;
  Expected e;
  try {
    e = run_reference(b, ro, backend);
  } catch (const std::exception& ex) {
    throw std::runtime_error("golden case '" + spec.name + "': reference of stage " + c.stage + " failed: " + ex.what());
  }
  for (const auto& t : e.tensors) c.expected[t.name] = t.value;
  if (auto p = validate_case(c, true); !p.empty())
    throw std::runtime_error("golden case '" + spec.name + "': reference output does not fit the schema: " + p.front().str());
  if (reference) *reference = std::move(e);
  return c;
}

std::string sha256_hex(const void* data, std::size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  static const char* hex = "0123456789abcdef";
  if (EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) != 1) throw std::runtime_error("SHA-256 failed (OpenSSL)");
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

std::vector<std::string> manifest_lines(const std::string& file, const Case& c) {
  std::vector<std::string> out;
  for (const auto& [gname, m] : {std::pair<const char*, const TensorMap*>{"inputs", &c.inputs}, {"outputs", &c.outputs}, {"expected", &c.expected}})
    for (const auto& [tn, t] : *m) {
      std::string shape = "[";
      for (int i = 0; i < t.rank(); ++i) {
        if (i) shape += ',';
        shape += std::to_string(t.dim(i));
      }
      shape += "]";
      out.push_back(file + " " + c.name + "/" + gname + "/" + tn + " " + std::string(dtype_name(t.dtype())) + " " + shape + " " +
                    sha256_hex(t.raw(), t.nbytes()));
    }
  std::string attrs = "schema_version=1\nstage=" + c.stage + "\n";
  for (const auto& [k, v] : c.attrs) attrs += k + "=" + attr_to_string(v) + "\n";
  for (const auto& [k, v] : c.links) attrs += std::string(io::kLinkAttrPrefix) + k + "=" + v + "\n";  // layer links
  out.push_back(file + " " + c.name + "/attrs - - " + sha256_hex(attrs.data(), attrs.size()));
  std::sort(out.begin(), out.end());
  return out;
}

std::uint64_t parse_seed(const std::string& s) {
  std::uint64_t v = 0;
  const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  const char* b = s.data() + (hex ? 2 : 0);
  const char* e = s.data() + s.size();
  auto [p, ec] = std::from_chars(b, e, v, hex ? 16 : 10);
  if (s.empty() || b == e || ec == std::errc::result_out_of_range || ec != std::errc() || p != e)
    throw std::invalid_argument("--seed: expected an integer in [0, 2^64) (decimal or 0x hex), found '" + s + "'");
  return v;
}

namespace {
const char* kManifestHeader =
    "# dsa-check golden MANIFEST v1: one line per dataset (and per case attrs)\n"
    "# <file> <case>/<group>/<tensor> <dtype> <shape> <sha256 of the raw little-endian row-major bytes>\n"
    "# <file> <case>/attrs - - <sha256 of the 'key=value' attr lines, stage and schema_version included>\n";
}

namespace {

// Runs `produce` into a fresh staging dir inside out_dir (it writes files there and returns their names and
// MANIFEST lines), merges the MANIFEST, then moves everything into out_dir. On failure the staging dir is removed
// and out_dir is left as it was.
using Producer = std::function<void(const fs::path& staging, std::vector<std::string>& files, std::vector<std::string>& lines)>;

std::vector<std::string> commit_staged(const std::string& out_dir, const Producer& produce) {
  if (out_dir.empty()) throw std::invalid_argument("--out: an output directory is required");
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) throw std::runtime_error(out_dir + ": output directory does not exist");
  if (!fs::is_directory(out_dir, ec)) throw std::runtime_error(out_dir + ": not a directory");
  static std::atomic<int> counter{0};
  const fs::path dir(out_dir);
  const fs::path staging = dir / (".golden-staging-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  if (!fs::create_directory(staging, ec) || ec) {
    std::string msg = out_dir;
    msg += ": cannot create files in the output directory (not writable?)";
    if (ec) {
      msg += ": ";
      msg += ec.message();
    }
    throw std::runtime_error(msg);
  }
  io::TempGuard staging_guard(staging.string(), /*is_dir=*/true);  // emptied and removed on SIGINT/SIGTERM
  std::vector<std::string> files;
  try {
    std::vector<std::string> lines;
    produce(staging, files, lines);
    // Merge: keep the lines of files already listed in DIR/MANIFEST that were not regenerated now.
    const std::set<std::string> fresh(files.begin(), files.end());
    if (std::ifstream old(dir / "MANIFEST"); old) {
      std::string line;
      while (std::getline(old, line)) {
        if (line.empty() || line[0] == '#') continue;
        const std::string f = line.substr(0, line.find(' '));
        if (!fresh.count(f) && fs::exists(dir / f, ec)) lines.push_back(line);
      }
    }
    std::sort(lines.begin(), lines.end());
    {
      std::ofstream m(staging / "MANIFEST", std::ios::binary);
      m << kManifestHeader;
      for (const auto& l : lines) m << l << "\n";
      m.flush();
      if (!m) throw std::runtime_error(out_dir + "/MANIFEST: write failed (" + std::string(std::strerror(errno)) + "); nothing written");
    }
    {
      io::DeferSignals defer;  // the goldens and their MANIFEST move in together: a signal waits for the last rename
      for (const auto& f : files) fs::rename(staging / f, dir / f);
      fs::rename(staging / "MANIFEST", dir / "MANIFEST");
    }
    fs::remove_all(staging, ec);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(staging, ec);
    throw std::runtime_error(out_dir + ": " + e.what());
  } catch (...) {
    fs::remove_all(staging, ec);
    throw;
  }
  return files;
}


}  // namespace

std::vector<std::string> write_goldens(const std::vector<const GoldenSpec*>& specs, const GoldenOptions& opt,
                                       const std::vector<const LayerSpec*>& layers) {
  return commit_staged(opt.out_dir, [&](const fs::path& staging, std::vector<std::string>& files, std::vector<std::string>& lines) {
    std::set<std::string> seen;
    const std::size_t total = specs.size() + layers.size();
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const GoldenSpec& s = *specs[i];
      if (!seen.insert(s.name).second) continue;
      if (opt.progress) opt.progress(i, total, s.name);
      Case c = make_case(s, opt.seed, opt.threads, nullptr, opt.backend);
      const std::string f = s.name + ".h5";
      io::write_file((staging / f).string(), {c});
      auto l = manifest_lines(f, c);
      lines.insert(lines.end(), l.begin(), l.end());
      files.push_back(f);
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
      const LayerSpec& s = *layers[i];
      if (!seen.insert(s.name).second) continue;
      if (opt.progress) opt.progress(specs.size() + i, total, s.name);
      const std::vector<Case> members = make_layer(s, opt.seed, opt.threads, opt.backend);
      const std::string f = s.name + ".h5";
      io::write_file((staging / f).string(), members);
      for (const Case& c : members) {
        auto l = manifest_lines(f, c);
        lines.insert(lines.end(), l.begin(), l.end());
      }
      files.push_back(f);
    }
    if (opt.progress) opt.progress(total, total, "");
  });
}

std::vector<std::string> write_demo(const std::string& out_dir, std::uint64_t seed, int threads) {
  // (case, mutant) pairs: the pass file gets plausible outputs, the fail file the mutant's outputs.
  const std::vector<std::string> pass_cases{"ragged_chunked_prefill", "topk_ties_at_kth"};
  const std::vector<std::pair<std::string, std::string>> fail_cases{{"ragged_chunked_prefill", "ragged_relu_missing"},
                                                                    {"topk_lengths_sparse", "topk_positional"}};
  auto base = [&](const std::string& name, Expected& E) {
    const GoldenSpec* s = find_spec(name);
    if (!s) throw std::runtime_error("demo: catalogue case '" + name + "' is missing");
    Case c = make_case(*s, std::nullopt, threads, &E);
    mutant::plausible_outputs(c, E, seed);
    return c;
  };
  return commit_staged(out_dir, [&](const fs::path& staging, std::vector<std::string>& files, std::vector<std::string>& lines) {
    std::vector<Case> pass, fail;
    for (const auto& n : pass_cases) {
      Expected E;
      pass.push_back(base(n, E));
    }
    for (const auto& [n, mname] : fail_cases) {
      Expected E;
      Case c = base(n, E);
      const Mutant* m = find_mutant(mname);
      if (!m) throw std::runtime_error("demo: selftest mutant '" + mname + "' is missing");
      m->apply(c, E, seed);
      c.name = n + "__" + mname;
      c.attrs["demo_bug"] = AttrValue{m->bug + ": " + m->doc};
      fail.push_back(std::move(c));
    }
    for (const auto& [f, cases] : {std::pair<std::string, const std::vector<Case>*>{"demo_pass.h5", &pass}, {"demo_fail.h5", &fail}}) {
      io::write_file((staging / f).string(), *cases);
      for (const auto& c : *cases) {
        auto l = manifest_lines(f, c);
        lines.insert(lines.end(), l.begin(), l.end());
      }
      files.push_back(f);
    }
  });
}

}  // namespace dsa::golden
