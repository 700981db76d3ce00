// libFuzzer target over dsa-check's own code, in process, without HDF5 and without fork (issue #35 item 1): the
// fuzzer's bytes (through FuzzedDataProvider) choose one to three small base cases -- every stage's selftest cases
// with plausible outputs, the same cases with the outputs of each of the stage's mutants (real bugs), the members of
// every layer golden (cases joined by links) -- then a sequence of edits: tensor bytes (with a table of hostile
// values: NaN codes, infinities, -1, INT_MAX, ...), shapes, dtypes, tensors dropped, moved between groups or renamed,
// attrs set (the stage's own, the provenance ones, unknown ones; every type; edge values) or removed, the stage
// renamed, links between cases, names made to collide. The edited cases then go through everything `check` does
// after reading a file (pipeline::check_cases): validation and the stage's parse, the reference, the comparators,
// hypotheses and sanity hints, layer chains, the run-wide checks (--deterministic, --invariance, the stages'
// cross-call consistency), first divergence, and the console / JSON / JUnit / HTML reports.
//
// A finding is a sanitizer report, a crash, an uncaught exception, or an empty message. Built by -DDSA_FUZZ=ON with
// clang (scripts/fuzz.sh); seeds tests/fuzz/case_corpus (minimized).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "pipeline/catalogue.hpp"
#include "pipeline/check.hpp"
#include "pipeline/golden.hpp"
#include "pipeline/layers.hpp"
#include "profiles/profile.hpp"
#include "report/console.hpp"
#include "report/html.hpp"
#include "io/text_file.hpp"
#include "report/json.hpp"
#include "report/junit.hpp"
#include "schema/schema.hpp"
#include "stage/mutant_kit.hpp"

namespace {
using namespace dsa;

constexpr std::int64_t kMaxTensorBytes = std::int64_t{1} << 16;  // bounded work per input
constexpr std::size_t kMaxBaseBytes = std::size_t{1} << 18;      // bases above this are left out of the pool

// One pool entry: a single case, or the members of a layer (checked together: links, chains).
using Entry = std::vector<Case>;

std::size_t case_bytes(const Case& c) {
  std::size_t n = 0;
  for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
    for (const auto& kv : *g) n += kv.second.nbytes();
  return n;
}

// A valid case of `spec` (generated inputs that pass validation), or nullopt.
std::optional<Case> valid_case(const golden::GoldenSpec& spec) {
  try {
    Case c = golden::generate_inputs(spec, 1, 1);
    if (!validate_case(c, false).empty()) return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The spec shrunk while its generator still makes a valid case: each dim and each list value halved, each list
// halved in length, greedily in name order, until the inputs fit kSmallBytes or nothing shrinks further. The pool's
// references then run in well under a millisecond (deterministic: the same pool in every process).
constexpr std::size_t kSmallBytes = std::size_t{12} << 10;
golden::GoldenSpec shrunk(golden::GoldenSpec spec) {
  auto bytes = [](const golden::GoldenSpec& s) {
    auto c = valid_case(s);
    return c ? case_bytes(*c) : std::numeric_limits<std::size_t>::max();
  };
  std::size_t best = bytes(spec);
  for (int round = 0; round < 12 && best > kSmallBytes && best != std::numeric_limits<std::size_t>::max(); ++round) {
    bool progress = false;
    auto attempt = [&](golden::GoldenSpec t) {
      const std::size_t b = bytes(t);
      if (b < best) {
        best = b;
        spec = std::move(t);
        progress = true;
      }
    };
    for (const auto& [k, v] : std::map<std::string, std::int64_t>(spec.dims))
      if (v > 1) {
        auto t = spec;
        t.dims[k] = v / 2;
        attempt(std::move(t));
      }
    for (const auto& [k, v] : std::map<std::string, std::vector<std::int64_t>>(spec.lists)) {
      if (v.size() > 1) {
        auto t = spec;
        t.lists[k].resize(v.size() / 2);
        attempt(std::move(t));
      }
      auto t = spec;
      for (auto& x : t.lists[k]) x = x > 1 ? x / 2 : x;
      if (t.lists[k] != v) attempt(std::move(t));
    }
    if (!progress) break;
  }
  return spec;
}

// The pool, built once per process (the generators and references are deterministic).
const std::vector<Entry>& pool() {
  static const std::vector<Entry> p = [] {
    std::vector<Entry> out;
    for (const Stage& st : stages()) {
      for (const auto& spec0 : st.selftest) {
        try {
          const golden::GoldenSpec spec = shrunk(spec0);
          Case c = golden::make_case(spec, 1, 1);
          c.expected.clear();
          BoundCase b;
          if (!validate_case(c, false, &b).empty()) continue;
          RefOptions ro;
          ro.threads = 1;
          const Expected E = run_reference(b, ro);
          mutant::plausible_outputs(c, E, 1);
          if (case_bytes(c) > kMaxBaseBytes) continue;
          out.push_back({c});
          std::uint64_t k = 0;
          for (const auto& m : st.mutants) {
            if (m.base != spec.name) continue;
            Case mc = c;
            mc.name = m.name;
            for (auto& [n, t] : mc.outputs) t = t.clone();
            try {
              m.apply(mc, E, 7 + k++);
            } catch (const std::exception&) {
              continue;
            }
            out.push_back({std::move(mc)});
          }
        } catch (const std::exception&) {
          // a stage whose selftest case cannot be built here is simply not in the pool
        }
      }
    }
    for (const auto& ls : golden::layer_catalogue()) {
      if (!ls.committed) continue;  // the serving-size recipes are too large for the pool
      try {
        std::vector<Case> members = golden::make_layer(ls, 1, 1);
        std::size_t bytes = 0;
        for (auto& m : members) {
          for (const auto& [n, t] : m.expected) m.outputs[n] = t;
          m.expected.clear();
          bytes += case_bytes(m);
        }
        if (bytes <= 4 * kMaxBaseBytes) out.push_back(std::move(members));
      } catch (const std::exception&) {
      }
    }
    if (out.empty()) std::abort();  // a setup error: nothing to fuzz
    return out;
  }();
  return p;
}

template <typename T>
T pick(FuzzedDataProvider& f, const std::vector<T>& v) {
  return v[f.ConsumeIntegralInRange<std::size_t>(0, v.size() - 1)];
}

TensorMap& group(Case& c, int g) { return g == 0 ? c.inputs : g == 1 ? c.outputs : c.expected; }

// A tensor of the case (any group) chosen by the fuzzer, or null when the case has none.
Tensor* pick_tensor(FuzzedDataProvider& f, Case& c, std::string* name = nullptr, int* grp = nullptr) {
  std::vector<std::pair<int, std::string>> all;
  for (int g = 0; g < 3; ++g)
    for (const auto& kv : group(c, g)) all.emplace_back(g, kv.first);
  if (all.empty()) return nullptr;
  const auto [g, n] = pick(f, all);
  if (name) *name = n;
  if (grp) *grp = g;
  return &group(c, g).at(n);
}

const std::vector<std::int64_t> kEdgeInts = {0,  1,  -1, 2,  3,  7,  8,  16, 63, 64, 127, 128, 255, 256, 511, 512, 576, 656,
                                             1024, 2048, -2, -128, 32767, 65535, std::int64_t{1} << 31, (std::int64_t{1} << 31) - 1,
                                             -(std::int64_t{1} << 31), std::int64_t{1} << 32, std::numeric_limits<std::int64_t>::max(),
                                             std::numeric_limits<std::int64_t>::min()};
const std::vector<double> kEdgeDoubles = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-6, 1e-300, 5e-324, 1e300, 448.0, 57344.0, 65504.0,
                                          std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(), 0.04419417382415922, 1.4426950408889634};

std::int64_t edge_int(FuzzedDataProvider& f) {
  return f.ConsumeBool() ? pick(f, kEdgeInts) : f.ConsumeIntegralInRange<std::int64_t>(-4, 4096);
}
double edge_double(FuzzedDataProvider& f) { return f.ConsumeBool() ? pick(f, kEdgeDoubles) : f.ConsumeFloatingPoint<double>(); }

// Hostile element values by storage width (NaN / inf codes of every float format, sign patterns, index edges).
void write_element(FuzzedDataProvider& f, Tensor& t, std::int64_t i) {
  std::byte* p = t.raw() + static_cast<std::size_t>(i) * dtype_size(t.dtype());
  switch (dtype_size(t.dtype())) {
    case 1: {
      static const std::uint8_t v[] = {0x00, 0x80, 0x7F, 0xFF, 0x7E, 0x7C, 0xFC, 0x01, 0x38};
      const std::uint8_t x = f.ConsumeBool() ? v[f.ConsumeIntegralInRange<std::size_t>(0, std::size(v) - 1)] : f.ConsumeIntegral<std::uint8_t>();
      std::memcpy(p, &x, 1);
      break;
    }
    case 2: {
      static const std::uint16_t v[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0x7C00, 0xFC00, 0x7E00, 0x0001, 0xFFFF, 0x7BFF, 0x3C00, 0x3F80};
      const std::uint16_t x = f.ConsumeBool() ? v[f.ConsumeIntegralInRange<std::size_t>(0, std::size(v) - 1)] : f.ConsumeIntegral<std::uint16_t>();
      std::memcpy(p, &x, 2);
      break;
    }
    case 4: {
      if (t.dtype() == DType::f32) {
        const float x = static_cast<float>(edge_double(f));
        std::memcpy(p, &x, 4);
      } else {
        const std::int32_t x = static_cast<std::int32_t>(edge_int(f));
        std::memcpy(p, &x, 4);
      }
      break;
    }
    default: {
      if (t.dtype() == DType::f64) {
        const double x = edge_double(f);
        std::memcpy(p, &x, 8);
      } else {
        const std::int64_t x = edge_int(f);
        std::memcpy(p, &x, 8);
      }
    }
  }
}

Tensor resized(const Tensor& t, DType dt, const Shape& shape) {
  Tensor n(dt, shape);
  if (t.defined() && n.nbytes() && t.nbytes()) std::memcpy(n.raw(), t.raw(), std::min(n.nbytes(), t.nbytes()));
  return n;
}

std::string some_name(FuzzedDataProvider& f, const Case& c) {
  std::vector<std::string> names;
  if (const Stage* st = find_stage(c.stage)) {
    for (const auto& t : st->schema.inputs) names.push_back(t.name);
    for (const auto& t : st->schema.outputs) names.push_back(t.tensor.name);
  }
  if (names.empty() || f.ConsumeIntegralInRange(0, 7) == 0) return f.ConsumeRandomLengthString(12);
  return pick(f, names);
}

AttrValue some_value(FuzzedDataProvider& f, const AttrSpec* spec) {
  switch (f.ConsumeIntegralInRange(0, 5)) {
    case 0: return edge_int(f);
    case 1: return edge_double(f);
    case 2:
      if (spec && !spec->choices.empty() && f.ConsumeBool()) return spec->choices[f.ConsumeIntegralInRange<std::size_t>(0, spec->choices.size() - 1)];
      return f.ConsumeRandomLengthString(16);
    case 3: {
      std::vector<std::int64_t> v(f.ConsumeIntegralInRange<std::size_t>(0, 17));
      for (auto& x : v) x = edge_int(f);
      return v;
    }
    case 4: {
      std::vector<double> v(f.ConsumeIntegralInRange<std::size_t>(0, 5));
      for (auto& x : v) x = edge_double(f);
      return v;
    }
    default:
      if (spec && spec->default_value) return *spec->default_value;
      return std::int64_t{0};
  }
}

void edit(FuzzedDataProvider& f, std::vector<Case>& cases) {
  Case& c = cases[f.ConsumeIntegralInRange<std::size_t>(0, cases.size() - 1)];
  const Stage* st = find_stage(c.stage);
  switch (f.ConsumeIntegralInRange(0, 11)) {
    case 0:
    case 1: {  // element values (a few writes into one tensor)
      Tensor* t = pick_tensor(f, c);
      if (!t || !t->defined() || t->numel() == 0) return;
      *t = t->clone();
      const int n = f.ConsumeIntegralInRange(1, 8);
      for (int k = 0; k < n; ++k) write_element(f, *t, f.ConsumeIntegralInRange<std::int64_t>(0, t->numel() - 1));
      return;
    }
    case 2: {  // a shape (same dtype; bytes kept where they fit)
      Tensor* t = pick_tensor(f, c);
      if (!t) return;
      Shape s(f.ConsumeIntegralInRange<std::size_t>(0, 4));
      std::int64_t numel = 1;
      for (auto& d : s) {
        d = f.ConsumeBool() && t->rank() ? t->shape()[f.ConsumeIntegralInRange<std::size_t>(0, t->shape().size() - 1)]
                                         : f.ConsumeIntegralInRange<std::int64_t>(0, 70);
        d = std::min<std::int64_t>(d, 4096);
        numel *= std::max<std::int64_t>(d, 1);
      }
      if (numel * static_cast<std::int64_t>(dtype_size(t->dtype())) > kMaxTensorBytes) return;
      *t = resized(*t, t->dtype(), s);
      return;
    }
    case 3: {  // a dtype (bytes reinterpreted; same element count)
      Tensor* t = pick_tensor(f, c);
      if (!t) return;
      const DType dt = kAllDTypes[f.ConsumeIntegralInRange<std::size_t>(0, std::size(kAllDTypes) - 1)];
      if (t->numel() * static_cast<std::int64_t>(dtype_size(dt)) > kMaxTensorBytes) return;
      *t = resized(*t, dt, t->shape());
      return;
    }
    case 4: {  // drop a tensor
      std::string n;
      int g = 0;
      if (pick_tensor(f, c, &n, &g)) group(c, g).erase(n);
      return;
    }
    case 5: {  // move / rename a tensor
      std::string n;
      int g = 0;
      Tensor* t = pick_tensor(f, c, &n, &g);
      if (!t) return;
      Tensor keep = *t;
      group(c, g).erase(n);
      group(c, f.ConsumeIntegralInRange(0, 2))[f.ConsumeBool() ? n : some_name(f, c)] = keep;
      return;
    }
    case 6: {  // set an attr: the stage's own, a provenance one, or any name
      const AttrSpec* spec = nullptr;
      std::string name;
      const int which = f.ConsumeIntegralInRange(0, 3);
      if (which <= 1 && st && !st->schema.attrs.empty()) {
        spec = &st->schema.attrs[f.ConsumeIntegralInRange<std::size_t>(0, st->schema.attrs.size() - 1)];
        name = spec->name;
      } else if (which == 2) {
        const auto& pa = provenance_attrs();
        name = pa[f.ConsumeIntegralInRange<std::size_t>(0, pa.size() - 1)].name;
      } else {
        name = f.ConsumeRandomLengthString(12);
      }
      if (name == "kernel" || name == "variant") {
        if (f.ConsumeBool()) {
          const auto& ps = kernel_profiles();
          if (!ps.empty()) {
            c.attrs[name] = std::string(ps[f.ConsumeIntegralInRange<std::size_t>(0, ps.size() - 1)]->name);
            return;
          }
        }
      }
      c.attrs[name] = some_value(f, spec);
      return;
    }
    case 7: {  // remove an attr
      if (c.attrs.empty()) return;
      auto it = c.attrs.begin();
      std::advance(it, f.ConsumeIntegralInRange<std::size_t>(0, c.attrs.size() - 1));
      c.attrs.erase(it);
      return;
    }
    case 8: {  // the stage
      const auto& all = stages();
      c.stage = f.ConsumeIntegralInRange(0, 5) ? all[f.ConsumeIntegralInRange<std::size_t>(0, all.size() - 1)].name
                                              : f.ConsumeRandomLengthString(24);
      return;
    }
    case 9: {  // a link to another case's output (or a dangling one)
      const Case& src = cases[f.ConsumeIntegralInRange<std::size_t>(0, cases.size() - 1)];
      std::string tensor = src.outputs.empty() ? "x" : src.outputs.begin()->first;
      if (!src.outputs.empty() && f.ConsumeBool()) {
        auto it = src.outputs.begin();
        std::advance(it, f.ConsumeIntegralInRange<std::size_t>(0, src.outputs.size() - 1));
        tensor = it->first;
      }
      const std::string target = f.ConsumeIntegralInRange(0, 7) ? src.name + (f.ConsumeBool() ? "/outputs/" : "/expected/") + tensor
                                                                 : f.ConsumeRandomLengthString(24);
      c.links[some_name(f, c)] = target;
      return;
    }
    case 10: {  // names: collide with another case, or anything
      c.name = f.ConsumeBool() ? cases[f.ConsumeIntegralInRange<std::size_t>(0, cases.size() - 1)].name : f.ConsumeRandomLengthString(16);
      return;
    }
    default: {  // drop a link
      if (c.links.empty()) return;
      auto it = c.links.begin();
      std::advance(it, f.ConsumeIntegralInRange<std::size_t>(0, c.links.size() - 1));
      c.links.erase(it);
      return;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)pool();  // built before the first input: its time is not an input's
  if (std::getenv("DSA_FUZZ_POOL_REPORT")) {  // each entry's size and the time of its checks (to tune kMax*)
    for (const auto& e : pool()) {
      const auto t0 = std::chrono::steady_clock::now();
      pipeline::RunOptions o;
      o.check.threads = 1;
      o.check.hint_samples = 2;
      (void)pipeline::check_cases(e, o);
      std::size_t bytes = 0;
      for (const auto& c : e) bytes += case_bytes(c);
      std::fprintf(stderr, "pool %-48s %-28s %8zu B %8.2f ms\n", e.front().name.c_str(), e.front().stage.c_str(), bytes,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider f(data, size);
  const auto& p = pool();
  std::vector<Case> cases;
  const int n = f.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < n; ++i) {
    const Entry& e = p[f.ConsumeIntegralInRange<std::size_t>(0, p.size() - 1)];
    for (const auto& c : e) cases.push_back(c);  // tensors shared with the pool: edits clone before writing
  }
  for (auto& c : cases) c.file = "fuzz.h5";
  const int edits = f.ConsumeIntegralInRange(0, 10);
  for (int k = 0; k < edits && f.remaining_bytes(); ++k) edit(f, cases);

  pipeline::RunOptions o;
  o.check.threads = 1;
  o.check.hint_samples = 2;  // the hint code runs; a failing attention output does not cost 64 row recomputations
  o.check.invariance = f.ConsumeBool();
  o.check.deterministic = f.ConsumeBool();
  o.check.no_emulation = f.ConsumeBool();
  o.check.nan = f.ConsumeBool() ? cmp::NanPolicy::exact : cmp::NanPolicy::any_code;
  o.check.plots = f.ConsumeBool();
  const report::RunReport rep = pipeline::check_cases(std::move(cases), o);
  for (const auto& r : rep.results)
    if (r.message.empty() && r.verdict != cmp::Verdict::BITEXACT) std::abort();  // every verdict but a pass says why
  for (const auto& pr : rep.problems)
    if (pr.empty()) std::abort();
  std::ostringstream con;
  report::print_console(rep, con, false, 1, false);
  (void)io::json_text(report::report_json(rep));  // as check --json writes it
  (void)report::junit_xml(rep);
  if (o.check.plots) (void)report::html_report(rep, "fuzz");
  (void)rep.exit_code();
  return 0;
}
