// `dsa-check golden`: list the golden catalogue, or write goldens (one HDF5 per case + MANIFEST).
#include <unistd.h>

#include <cstdio>
#include <iomanip>
#include <iostream>

#include "apps/dsa-check/commands.hpp"
#include "pipeline/catalogue.hpp"
#include "pipeline/golden.hpp"
#include "pipeline/layers.hpp"

namespace dsa::cli {

namespace {

void print_catalogue(std::ostream& os) {
  const auto& cat = golden::catalogue();
  os << "golden catalogue (" << cat.size() << " cases; * = committed in golden/; model V3.2: H=64 D=128 topk=2048 page 64)\n";
  for (const auto& s : cat) {
    os << (s.committed ? "* " : "  ") << std::left << std::setw(32) << s.name << std::setw(25) << s.stage
       << std::setw(28) << s.generator << "seed " << s.seed << "\n"
       << "      shapes:  " << golden::shapes_str(s) << "\n"
       << "      options: " << golden::options_str(s) << "\n"
       << "      " << s.doc << "\n";
  }
  os << "\nlayer goldens (one file, several stages joined by links; * = committed):\n";
  for (const auto& l : golden::layer_catalogue())
    os << (l.committed ? "* " : "  ") << std::left << std::setw(32) << l.name << "seed " << l.seed << "\n      " << l.doc << "\n";
  os << "\ngenerators:\n";
  for (const Stage& st : stages())
    for (const auto& g : st.generators) os << "  " << std::left << std::setw(28) << g.name << std::setw(25) << g.stage << g.doc << "\n";
}

}  // namespace

void add_golden(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("golden", "Write golden cases (inputs/ + expected/ HDF5 and a SHA-256 MANIFEST) from the seeded catalogue");
  struct Opts {
    bool list = false, all = false, committed = false, demo = false;
    std::vector<std::string> cases;
    std::string out, seed;
    int jobs = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_flag("--list", o->list, "print the case catalogue and the generators");
  cmd->add_option("--case", o->cases, "case name(s) from --list")->expected(1, -1);
  cmd->add_flag("--all", o->all, "every catalogue case (including the large, uncommitted ones)");
  cmd->add_flag("--committed", o->committed, "the cases committed in golden/");
  cmd->add_flag("--demo", o->demo, "write the demo pair demo_pass.h5 / demo_fail.h5 (plausible kernel outputs / a seeded bug)");
  cmd->add_option("--out", o->out, "output directory (must exist)");
  cmd->add_option("--seed", o->seed, "override every case's seed (decimal or 0x hex, < 2^64)");
  cmd->add_option("-j,--jobs", o->jobs, "threads (default: OMP_NUM_THREADS / all cores); output is identical for any value")
      ->check(CLI::Range(0, 4096));
  auto backend = std::make_shared<std::string>("cpu");
  add_backend_option(cmd, *backend);
  cmd->callback([o, backend, &rc] {
    if (o->list) {
      print_catalogue(std::cout);
      rc = 0;
      return;
    }
    std::vector<const golden::GoldenSpec*> specs;
    std::vector<const golden::LayerSpec*> layers;
    for (const auto& n : o->cases) {
      const auto* s = golden::find_spec(n);
      if (const auto* l = s ? nullptr : golden::find_layer_spec(n)) {
        layers.push_back(l);
        continue;
      }
      if (!s) {
        std::cerr << "error: golden: unknown case '" << n << "' (see `dsa-check golden --list`)\n";
        rc = 2;
        return;
      }
      specs.push_back(s);
    }
    for (const auto& s : golden::catalogue())
      if (o->all || (o->committed && s.committed)) specs.push_back(&s);
    for (const auto& l : golden::layer_catalogue())
      if (o->all || (o->committed && l.committed)) layers.push_back(&l);
    if (specs.empty() && layers.empty() && !o->demo) {
      std::cerr << "error: golden: nothing to do: give --list, --case NAME..., --committed, --all or --demo\n";
      rc = 2;
      return;
    }
    if (o->out.empty()) {
      std::cerr << "error: golden: --out DIR is required\n";
      rc = 2;
      return;
    }
    golden::GoldenOptions go;
    go.out_dir = o->out;
    go.threads = o->jobs;
    if (!resolve_backend(*backend, go.backend)) {
      rc = 2;
      return;
    }
    try {
      if (!o->seed.empty()) go.seed = golden::parse_seed(o->seed);
    } catch (const std::exception& e) {
      std::cerr << "error: golden: " << e.what() << "\n";
      rc = 2;
      return;
    }
    const bool tty = ::isatty(::fileno(stderr)) != 0;
    if (tty)
      go.progress = [](std::size_t done, std::size_t total, const std::string& name) {
        std::cerr << "\r\033[K[" << done << "/" << total << "] " << (done == total ? std::string("done") : name) << std::flush;
        if (done == total) std::cerr << "\n";
      };
    if (o->demo && (!specs.empty() || !layers.empty())) {
      std::cerr << "error: golden: --demo writes its own pair of files; do not combine it with --case/--committed/--all\n";
      rc = 2;
      return;
    }
    try {
      const auto files = o->demo ? golden::write_demo(go.out_dir, go.seed.value_or(1), go.threads) : golden::write_goldens(specs, go, layers);
      std::cout << "golden: wrote " << files.size() << " file(s) and MANIFEST to " << o->out << "\n";
      rc = 0;
    } catch (const std::exception& e) {
      if (tty) std::cerr << "\n";
      std::cerr << "error: golden: " << e.what() << "\n";
      rc = 2;
    }
  });
}

}  // namespace dsa::cli
