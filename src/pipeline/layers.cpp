// Layer goldens and the layer selftest (see layers.hpp).
#include "pipeline/layers.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

#include "pipeline/layer.hpp"
#include "stage/mutant_kit.hpp"

namespace dsa::golden {

namespace {

// The members in pipeline order: a member once every source of its links is placed (ties: stage pipeline_order).
std::vector<std::size_t> member_order(const std::vector<Case>& cs, const std::string& what) {
  std::vector<std::size_t> order;
  std::set<std::size_t> left;
  for (std::size_t i = 0; i < cs.size(); ++i) left.insert(i);
  auto placed = [&](const std::string& name) {
    for (std::size_t i : order)
      if (cs[i].name == name) return true;
    return false;
  };
  while (!left.empty()) {
    std::size_t best = cs.size();
    for (std::size_t i : left) {
      bool ready = true;
      for (const auto& [in, src] : cs[i].links) ready = ready && placed(src.substr(0, src.find('/')));
      if (!ready) continue;
      const int po = find_stage(cs[i].stage) ? find_stage(cs[i].stage)->pipeline_order : 1 << 20;
      if (best == cs.size() || po < find_stage(cs[best].stage)->pipeline_order) best = i;
    }
    if (best == cs.size()) throw std::runtime_error("layer " + what + ": its links name a member that does not exist or form a cycle");
    order.push_back(best);
    left.erase(best);
  }
  return order;
}

// Fills c's linked inputs from the members before it (`group` of the source: "expected" or "outputs").
void fill_links(Case& c, const std::vector<Case>& done, const std::string& group, const std::string& what) {
  for (auto& [in, src] : c.links) {
    const auto s1 = src.find('/'), s2 = src.rfind('/');
    const std::string mname = src.substr(0, s1), t = src.substr(s2 + 1);
    const Case* m = nullptr;
    for (const auto& d : done)
      if (d.name == mname) m = &d;
    const TensorMap* g = m ? (group == "expected" ? &m->expected : &m->outputs) : nullptr;
    if (!g || !g->count(t)) throw std::runtime_error("layer " + what + ": member " + c.name + " links " + in + " to " + src + ", not built");
    Tensor v = g->at(t);
    if (auto it = c.inputs.find(in); it != c.inputs.end() && it->second.shape() != v.shape()) {
      if (it->second.numel() != v.numel())
        throw std::runtime_error("layer " + what + ": " + c.name + "/inputs/" + in + " cannot be read from " + src + " (element counts differ)");
      v = v.reshape(it->second.shape());
    }
    c.inputs[in] = v;
    src = mname + "/" + group + "/" + t;
  }
}

}  // namespace

const LayerSpec* find_layer_spec(const std::string& name) {
  for (const auto& s : layer_catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

std::vector<Case> make_layer(const LayerSpec& s, std::optional<std::uint64_t> seed, int threads, Backend backend, std::vector<Expected>* refs) {
  std::vector<Case> built = s.build(seed.value_or(s.seed), threads);
  const auto order = member_order(built, s.name);
  std::vector<Case> out;
  if (refs) refs->clear();
  for (std::size_t i : order) {
    Case c = std::move(built[i]);
    c.attrs["layer"] = AttrValue{s.name};
    apply_attr_defaults(c);
    fill_links(c, out, "expected", s.name);
    Expected E;
    c = with_reference(std::move(c), s.name + "/" + c.name, threads, &E, backend);
    out.push_back(std::move(c));
    if (refs) refs->push_back(std::move(E));
  }
  return out;
}

namespace {

// Members as a kernel's dump: outputs (plausible results of the reference on the member's inputs), no expected/,
// every link naming outputs; from member `from` on, each member's linked inputs are its upstream OUTPUTS and its
// reference is recomputed from them. A member whose recomputed inputs are invalid (a bad upstream index, say) is
// dropped with its reason in `dropped`.
void propagate(std::vector<Case>& cs, std::vector<Expected>& refs, std::size_t from, std::uint64_t seed, int threads, Backend backend,
               std::vector<std::string>& dropped) {
  for (std::size_t j = from; j < cs.size(); ++j) {
    Case& c = cs[j];
    std::vector<Case> before(cs.begin(), cs.begin() + static_cast<std::ptrdiff_t>(j));
    bool linked_to_dropped = false;
    for (const auto& [in, src] : c.links)
      for (const auto& d : dropped) linked_to_dropped = linked_to_dropped || d.rfind(src.substr(0, src.find('/')) + ":", 0) == 0;
    if (linked_to_dropped) {
      dropped.push_back(c.name + ": below a dropped member");
      continue;
    }
    fill_links(c, before, "outputs", "selftest");
    BoundCase b;
    if (auto p = validate_case(c, false, &b); !p.empty()) {
      dropped.push_back(c.name + ": " + p.front().str());
      continue;
    }
    RefOptions ro;
    ro.threads = threads;
    refs[j] = run_reference(b, ro, backend);
    c.outputs.clear();
    mutant::plausible_outputs(c, refs[j], seed + j);
  }
}

// The first member (index into cs) whose local check fails, or cs.size(); `lines` gets every failing local result.
std::size_t first_local_failure(const std::vector<Case>& cs, const std::vector<std::string>& dropped, const pipeline::CheckOptions& o,
                                std::vector<std::string>& lines, std::vector<std::string>* drifting = nullptr) {
  std::vector<Case> kept;
  std::vector<std::size_t> map;
  for (std::size_t j = 0; j < cs.size(); ++j) {
    bool gone = false;
    for (const auto& d : dropped) gone = gone || d.rfind(cs[j].name + ":", 0) == 0;
    if (gone) continue;
    kept.push_back(cs[j]);
    kept.back().file = "(layer selftest)";
    map.push_back(j);
  }
  std::vector<ParamsPtr> params(kept.size());
  for (std::size_t j = 0; j < kept.size(); ++j) {
    BoundCase b;
    if (validate_case(kept[j], true, &b).empty()) params[j] = b.params;
  }
  std::size_t first = cs.size();
  const auto layers = pipeline::find_layers(kept);
  std::vector<std::vector<cmp::CheckResult>> res(kept.size());
  std::set<std::size_t> in_layer;
  for (const auto& l : layers) {
    auto r = pipeline::check_layer(l, kept, params, o);
    for (std::size_t q = 0; q < l.order.size(); ++q) {
      res[l.order[q]] = std::move(r[q]);
      in_layer.insert(l.order[q]);
    }
  }
  for (std::size_t j = 0; j < kept.size(); ++j) {
    if (!in_layer.count(j)) res[j] = pipeline::check_case(kept[j], o);
    bool drift = false;
    for (const auto& r : res[j]) {
      if (!r.informational && !r.pass()) {
        first = std::min(first, map[j]);
        lines.push_back(r.case_name + "/" + r.group + "/" + r.tensor + " " + std::string(cmp::verdict_name(r.verdict)) + ": " + r.message);
      }
      drift = drift || (r.informational && !cmp::verdict_pass(r.verdict));
    }
    if (drift && drifting) drifting->push_back(kept[j].name);
  }
  return first;
}

}  // namespace

bool layer_selftest(std::ostream& out, int threads, Backend backend, bool verbose) {
  bool all_ok = true;
  pipeline::CheckOptions o;
  o.backend = backend;
  o.threads = threads;
  const std::uint64_t seed = 1;
  for (const LayerSpec& ls : layer_catalogue()) {
    if (!ls.committed) continue;  // the large serving-size recipes are benchmarks, not selftest layers
    std::vector<Case> base;
    std::vector<Expected> refs;
    std::vector<std::string> dropped;
    std::string missing;  // member stages without an implementation on this backend
    for (const auto& c : ls.build(ls.seed, threads))
      if (const Stage* st = find_stage(c.stage); st && !st->impl_for(backend)) missing += (missing.empty() ? "" : ", ") + st->name;
    if (!missing.empty()) {
      out << "LEFT OUT layer " << ls.name << ": no " << backend_name(backend) << " implementation of " << missing << "\n";
      continue;
    }
    try {
      base = make_layer(ls, std::nullopt, threads, backend, &refs);
      for (auto& c : base) {
        c.expected.clear();
        for (auto& [in, src] : c.links) src.replace(src.find("/expected/"), 10, "/outputs/");
      }
      propagate(base, refs, 0, seed, threads, backend, dropped);
    } catch (const std::exception& e) {
      out << "FAIL     layer " << ls.name << ": cannot build: " << e.what() << "\n";
      all_ok = false;
      continue;
    }
    std::vector<std::string> lines;
    const std::size_t f0 = dropped.empty() ? first_local_failure(base, dropped, o, lines) : 0;
    if (!dropped.empty() || f0 != base.size()) {
      out << "FAIL     layer " << ls.name << ": the plausible base layer does not pass: " << (dropped.empty() ? lines.front() : dropped.front()) << "\n";
      all_ok = false;
      continue;
    }
    std::int64_t total = 0, attributed = 0, not_applicable = 0;
    std::string stages_seen;
    for (std::size_t i = 0; i < base.size(); ++i) {
      const Stage* st = find_stage(base[i].stage);
      stages_seen += (stages_seen.empty() ? "" : ", ") + st->name;
      for (const Mutant& m : st->mutants) {
        std::vector<Case> cs = base;
        std::vector<Expected> rs = refs;
        for (auto& [n, t] : cs[i].outputs) t = t.clone();
        const TensorMap before = base[i].outputs;
        std::vector<std::string> drop;
        try {
          m.apply(cs[i], rs[i], seed * 1000003u + static_cast<std::uint64_t>(i * 131 + static_cast<std::size_t>(total)));
        } catch (const std::exception&) {
          ++not_applicable;  // the mutant needs a feature this member lacks
          continue;
        }
        bool changed = cs[i].outputs.size() != before.size();
        for (const auto& [n, t] : cs[i].outputs) changed = changed || !before.count(n) || !before.at(n).same_bytes(t);
        if (!changed) {
          ++not_applicable;
          continue;
        }
        try {
          propagate(cs, rs, i + 1, seed, threads, backend, drop);
        } catch (const std::exception& e) {
          drop.push_back(std::string("(propagation) ") + e.what());
        }
        ++total;
        bool benign = !m.expect.empty();
        for (auto v : m.expect) benign = benign && cmp::verdict_pass(v);
        std::vector<std::string> ls_lines, drifting;
        const std::size_t first = first_local_failure(cs, drop, o, ls_lines, &drifting);
        if (!benign && first == cs.size()) {
          // The member passes its own check with this mutant: the bug needs a feature the member lacks (a cache
          // layout, sinks, the extra KV scope, another dequant); nothing to attribute.
          --total;
          ++not_applicable;
          if (verbose) out << "N/A      " << ls.name << ": " << m.name << " [" << m.bug << "] at " << cs[i].name << ": the member passes its own check\n";
          continue;
        }
        const bool ok = benign ? first == cs.size() : first == i;
        attributed += ok ? 1 : 0;
        if (!ok || verbose) {
          std::string dr;
          for (const auto& d : drifting) dr += (dr.empty() ? "" : ", ") + d;
          out << (ok ? "ATTRIB   " : "MISATTR  ") << ls.name << ": " << m.name << " [" << m.bug << "] at " << cs[i].name << " (" << st->name
              << "): first local divergence " << (first == cs.size() ? std::string("none") : cs[first].name)
              << (drop.empty() ? "" : "; " + std::to_string(drop.size()) + " member(s) below get invalid inputs")
              << (dr.empty() ? "" : "; end-to-end drift at " + dr) << "\n";
          if (!ok)
            for (const auto& l : ls_lines) out << "         " << l << "\n";
        }
      }
    }
    const bool ok = attributed == total && total > 0;
    all_ok = all_ok && ok;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", total ? 100.0 * static_cast<double>(attributed) / static_cast<double>(total) : 0.0);
    out << (ok ? "PASS     " : "FAIL     ") << "layer " << ls.name << " [" << stages_seen << "]: attribution " << attributed << "/" << total
        << " mutants (" << pct << " %)"
        << (not_applicable ? ", " + std::to_string(not_applicable) + " not applicable (the member passes its own check: the bug needs a feature it lacks)" : "")
        << "\n";
  }
  return all_ok;
}

}  // namespace dsa::golden
