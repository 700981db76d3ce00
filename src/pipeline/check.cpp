#include "pipeline/check.hpp"

#include "io/text_file.hpp"

#include <fnmatch.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "io/paths.hpp"
#include "pipeline/layer.hpp"
#include "pipeline/load.hpp"
#include "pipeline/timing.hpp"
#include "report/console.hpp"
#include "report/html.hpp"
#include "report/json.hpp"
#include "report/junit.hpp"
#include "stage/stage.hpp"


namespace dsa::pipeline {

namespace {

// Worst verdict of a list of results (ERROR worst, then the failing ones, then WITHIN_BOUND, BITEXACT).
cmp::Verdict worst_verdict(const std::vector<const cmp::CheckResult*>& v) {
  auto rank = [](cmp::Verdict x) { return x == cmp::Verdict::ERROR ? 3 : !cmp::verdict_pass(x) ? 2 : x == cmp::Verdict::WITHIN_BOUND ? 1 : 0; };
  cmp::Verdict w = cmp::Verdict::BITEXACT;
  for (const auto* r : v)
    if (rank(r->verdict) > rank(w)) w = r->verdict;
  return w;
}

// Layers (results with `layer`): per (file, layer), the cases in layer_pos order; the first whose LOCAL verdict fails
// is the first divergence; the end-to-end verdicts below it say how far the fault travels.
std::vector<std::string> layer_divergence(const std::vector<cmp::CheckResult>& results) {
  auto pick = [&](const std::vector<std::size_t>& idx) {
    std::vector<const cmp::CheckResult*> v;
    for (auto i : idx) v.push_back(&results[i]);
    return v;
  };
  std::vector<std::string> out;
  for (const auto& view : report::layer_views(results)) {
    const auto& L = view.stages;
    const report::LayerStage* first = nullptr;
    std::string chain, drift;
    for (const auto& [pos, p] : L) {
      chain += (chain.empty() ? "" : " -> ") + p.stage;
      const cmp::Verdict lv = worst_verdict(pick(p.local));
      if (!first && !cmp::verdict_pass(lv)) {
        first = &p;
        continue;
      }
      if (p.e2e.empty()) continue;
      const auto e2e = pick(p.e2e);
      const cmp::Verdict ev = worst_verdict(e2e);
      if (ev != cmp::Verdict::BITEXACT) {
        bool band = false, own = false;
        for (const auto* r : e2e) {
          band = band || (r->topk && r->topk->swaps > 0 && r->pass());
          for (const auto& n : r->notes) own = own || n.find("own selection") != std::string::npos;
        }
        drift += std::string(drift.empty() ? "" : ", ") + p.stage + " " + std::string(cmp::verdict_name(ev)) +
                 (band ? " (differs from the chain only inside the tie band)" : "") + (own ? " (on the kernel's own top-k)" : "");
      }
    }
    const std::string where = "layer " + view.layer + " of " + view.file + " [" + chain + "]";
    if (first)
      out.push_back(where + ": first divergence: " + first->stage + " (case '" + first->case_name + "', local " +
                    std::string(cmp::verdict_name(worst_verdict(pick(first->local)))) + ")" +
                    (drift.empty() ? "" : "; end to end below it: " + drift));
    else
      out.push_back(where + ": no divergence: all " + std::to_string(L.size()) + " cases pass locally" +
                    (drift.empty() ? "; end to end bit-exact" : "; end to end: " + drift));
  }
  return out;
}

}  // namespace

std::vector<std::string> first_divergence(const std::vector<cmp::CheckResult>& results) {
  // key (file, step) -> stage order -> (stage, case, any failing)
  struct StageInfo {
    std::string stage, case_name;
    bool fail = false;
  };
  std::map<std::pair<std::string, std::string>, std::map<int, std::vector<StageInfo>>> groups;
  std::vector<std::pair<std::string, std::string>> order;
  std::set<std::pair<std::string, std::string>> seen_case;
  std::vector<std::string> out = layer_divergence(results);
  for (const auto& r : results) {
    if (r.group == "determinism" || !r.layer.empty()) continue;
    const Stage* st = find_stage(r.stage);
    const int po = st ? st->pipeline_order : 1 << 20;
    const auto key = std::make_pair(r.file, r.step);
    if (!groups.count(key)) order.push_back(key);
    auto& v = groups[key][po];
    auto it = std::find_if(v.begin(), v.end(), [&](const StageInfo& s) { return s.case_name == r.case_name; });
    if (it == v.end()) {
      v.push_back({r.stage, r.case_name, false});
      it = std::prev(v.end());
    }
    it->fail = it->fail || !r.pass();
  }
  for (const auto& key : order) {
    const auto& g = groups[key];
    std::set<std::string> stages;
    for (const auto& [po, v] : g)
      for (const auto& s : v) stages.insert(s.stage);
    if (stages.size() < 2) continue;
    std::int64_t later = 0;
    const StageInfo* first = nullptr;
    for (const auto& [po, v] : g)
      for (const auto& s : v)
        if (s.fail) {
          if (!first) first = &s;
          else if (s.stage != first->stage) ++later;
        }
    const std::string where = key.first + (key.second.empty() ? "" : " (step " + key.second + ")");
    if (first)
      out.push_back("first divergence in " + where + ": stage " + first->stage + " (case '" + first->case_name + "')" +
                    (later ? ", " + std::to_string(later) + " later failing case(s)" : std::string("")));
    else
      out.push_back("no divergence in " + where + ": all " + std::to_string(stages.size()) + " stages pass");
  }
  return out;
}

namespace {

// --invariance (CheckOptions::invariance): the verdicts of every request (attr request_ids, one id per request or row)
// that several cases of one stage and layer hold must agree (pass in every case or fail in every case); the
// row-identity cross-checks of the stages must have compared something. Appends results of group "invariance".
void invariance_results(const std::vector<Case>& cases, std::vector<cmp::CheckResult>& results) {
  auto result = [](const std::string& stage, const std::string& file, cmp::Verdict v, std::string msg) {
    cmp::CheckResult r;
    r.stage = stage;
    r.file = file;
    r.case_name = "-";
    r.group = "invariance";
    r.tensor = "-";
    r.verdict = v;
    r.message = std::move(msg);
    return r;
  };
  // Pass/fail of each case (its local results).
  std::map<std::pair<std::string, std::string>, bool> pass;
  for (const auto& r : results)
    if (!r.informational && (r.group == "outputs" || r.group == "expected")) {
      auto [it, fresh] = pass.try_emplace({r.file, r.case_name}, true);
      it->second = it->second && r.pass();
    }
  struct Seen {
    const Case* c;
    bool pass;
  };
  std::map<std::tuple<std::string, std::string, std::int64_t>, std::vector<Seen>> by;  // (stage, layer, request)
  for (const auto& c : cases) {
    auto rid = c.attrs.find("request_ids");
    auto p = pass.find({c.file, c.name});
    if (rid == c.attrs.end() || p == pass.end()) continue;
    const std::string layer = c.has_attr("layer") ? attr_to_string(c.attrs.at("layer")) : "";
    std::set<std::int64_t> ids;
    if (auto v = std::get_if<std::vector<std::int64_t>>(&rid->second)) ids.insert(v->begin(), v->end());
    else if (auto i = std::get_if<std::int64_t>(&rid->second)) ids.insert(*i);
    for (auto id : ids) by[{c.stage, layer, id}].push_back({&c, p->second});
  }
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> per_stage;  // stage -> (requests compared, differing)
  std::map<std::string, std::string> first_bad, stage_file;
  for (const auto& kv : by) {
    const std::vector<Seen>& v = kv.second;
    if (v.size() < 2) continue;
    const auto& [stage, layer, id] = kv.first;
    auto& [n, bad] = per_stage[stage];
    stage_file[stage] = v.front().c->file;
    ++n;
    const auto diff = std::find_if(v.begin(), v.end(), [&](const Seen& s) { return s.pass != v.front().pass; });
    if (diff == v.end()) continue;
    if (bad++ == 0) {
      const Seen& p = v.front().pass ? v.front() : *diff;
      const Seen& f = v.front().pass ? *diff : v.front();
      first_bad[stage] = "request " + std::to_string(id) + (layer.empty() ? "" : " of layer " + layer) + " passes in case '" + p.c->name +
                         "' (" + p.c->file + ") but fails in case '" + f.c->name + "' (" + f.c->file + ")";
    }
  }
  bool any_consistency = false;
  for (const auto& r : results) any_consistency = any_consistency || r.group == "consistency";
  if (per_stage.empty() && !any_consistency) {
    results.push_back(result("-", cases.empty() ? "" : cases.front().file, cmp::Verdict::ERROR,
                             "--invariance: no request appears in two cases (give every case attr request_ids, one id per request, "
                             "and dump the same request twice: alone and in a batch, or in a prefill and a decode capture)"));
    return;
  }
  for (const auto& [stage, nb] : per_stage) {
    const auto [n, bad] = nb;
    results.push_back(result(stage, stage_file[stage], bad ? cmp::Verdict::FAIL : cmp::Verdict::BITEXACT,
                             bad ? std::to_string(bad) + " of " + std::to_string(n) +
                                       " repeated request(s) get different verdicts across cases (the result depends on the batch or "
                                       "the step split, B19/B20); first: " + first_bad[stage]
                                 : "same verdict for each of " + std::to_string(n) + " request(s) repeated across cases"));
  }
}

}  // namespace

std::int64_t shard_of(const std::string& file, const std::string& case_name, std::int64_t count) {
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a 64 over "file\0case": stable across runs and machines
  for (const std::string* s : {&file, &case_name}) {
    for (unsigned char ch : *s) h = (h ^ ch) * 1099511628211ull;
    h = (h ^ 0u) * 1099511628211ull;
  }
  return static_cast<std::int64_t>(h % static_cast<std::uint64_t>(count));
}

namespace {

// The cases of one batch of files, as read: each case's Params (parsed once by the reader's validation) and its
// (file index, index in its file): the report order.
struct Batch {
  std::vector<Case> cases;
  std::vector<ParamsPtr> params;
  std::vector<std::pair<std::int64_t, std::int64_t>> pos;
};

// Progress of the whole run: cases done, and the expected total (the cases read so far plus, for the files not read
// yet, the mean number of cases per file read).
struct Progress {
  const ProgressFn* fn = nullptr;
  std::size_t done = 0, read = 0, files_read = 0, files = 0;
  std::size_t total() const {
    return files_read ? read + (files - files_read) * read / files_read : read;
  }
};

// Every local check of a batch (cases in parallel, then its layers as chains), results appended in report order.
void check_batch(Batch& b, const RunOptions& o, RunReport& rep, Progress& prog) {
  std::vector<Case>& cases = b.cases;
  std::vector<std::vector<cmp::CheckResult>> per(cases.size());
  std::atomic<std::size_t> next{0};
  std::mutex pm;
  const int jobs = std::max(1, std::min<int>(o.jobs, static_cast<int>(std::max<std::size_t>(cases.size(), 1))));
  // Each case's reference runs its own OpenMP team: with -j N and no --threads, share the cores between the jobs
  // instead of starting N full teams (the results do not depend on the thread count).
  CheckOptions copt = o.check;
  if (jobs > 1 && copt.threads <= 0) copt.threads = std::max(1, omp_get_max_threads() / jobs);
  // Layers (cases joined by links; never across files) are checked as chains after the single cases, in pipeline order.
  const std::vector<Layer> layers = find_layers(cases);
  std::vector<int> layer_of(cases.size(), -1);
  for (std::size_t li = 0; li < layers.size(); ++li)
    for (std::size_t i : layers[li].order) layer_of[i] = static_cast<int>(li);
  auto tick = [&](const Case& c) {
    std::lock_guard<std::mutex> lk(pm);
    ++prog.done;
    if (*prog.fn) (*prog.fn)(prog.done, prog.total(), c);
  };
  auto worker = [&] {
    for (std::size_t i; (i = next++) < cases.size();) {
      if (layer_of[i] >= 0) continue;
      per[i] = b.params[i] ? check_case(BoundCase{&cases[i], find_stage(cases[i].stage), b.params[i], kernel_profile(cases[i])}, copt)
                           : check_case(cases[i], copt);
      tick(cases[i]);
    }
  };
  if (jobs == 1) {
    worker();
  } else {
    std::vector<std::thread> ts;
    for (int t = 0; t < jobs; ++t) ts.emplace_back(worker);
    for (auto& t : ts) t.join();
  }
  {
    CheckOptions lopt = o.check;  // a layer's cases run one after another: every core for each reference
    for (const auto& l : layers) {
      auto lr = check_layer(l, cases, b.params, lopt);
      for (std::size_t k = 0; k < l.order.size(); ++k) {
        per[l.order[k]] = std::move(lr[k]);
        tick(cases[l.order[k]]);
      }
    }
  }
  // Report order: file/case order, a layer's cases together (pipeline order) where its first case stands.
  for (std::size_t i = 0; i < per.size(); ++i) {
    const int li = layer_of[i];
    if (li >= 0 && *std::min_element(layers[li].order.begin(), layers[li].order.end()) != i) continue;
    for (std::size_t j : li >= 0 ? layers[li].order : std::vector<std::size_t>{i})
      for (auto& r : per[j]) {
        if (cases[j].has_attr("step")) r.step = attr_to_string(cases[j].attrs.at("step"));
        std::tie(r.file_pos, r.case_pos) = b.pos[i];
        rep.results.push_back(std::move(r));
      }
  }
}

// Whether a run-wide check can read the tensors of case `c`: a stage's cross_check when the case carries one of the
// provenance attrs it keys on (Stage::cross_attrs), --deterministic for the index outputs. The other cases are kept
// as shells (name, stage, attrs; tensors dropped), so that memory stays flat over many files.
bool run_wide_needs_tensors(const Case& c, const RunOptions& o) {
  const Stage* own = find_stage(c.stage);
  if (o.check.deterministic && own)
    for (const auto& os : own->schema.outputs)
      if (os.compare == CompareKind::topk_set && c.outputs.count(os.tensor.name)) return true;
  for (const Stage& st : stages()) {
    if (!st.cross_check) continue;
    if (c.stage != st.name && std::find(st.cross_with.begin(), st.cross_with.end(), c.stage) == st.cross_with.end()) continue;
    for (const auto& a : st.cross_attrs)
      if (c.has_attr(a)) return true;
  }
  return false;
}

Case shell_of(Case&& c) {
  Case s;
  s.file = std::move(c.file);
  s.name = std::move(c.name);
  s.stage = std::move(c.stage);
  s.attrs = std::move(c.attrs);
  for (auto [from, to] : {std::pair{&c.inputs, &s.inputs}, {&c.outputs, &s.outputs}, {&c.expected, &s.expected}})
    for (const auto& kv : *from) to->emplace(kv.first, Tensor());
  return s;
}

// The checks over all the cases of the run: --deterministic, the stages' cross-case consistency, --invariance.
void run_wide_checks(const std::vector<Case>& cases, const std::vector<ParamsPtr>& params, const RunOptions& o, RunReport& rep) {
  // --deterministic: identical index tensors across dumps of the same case name.
  if (o.check.deterministic) {
    std::map<std::pair<std::string, std::string>, std::vector<const Case*>> by;
    std::vector<std::pair<std::string, std::string>> order;
    for (const auto& c : cases) {
      const Stage* st = find_stage(c.stage);
      if (!st) continue;
      for (const auto& os : st->schema.outputs) {
        if (os.compare != CompareKind::topk_set || !c.outputs.count(os.tensor.name)) continue;
        const auto key = std::make_pair(c.name, os.tensor.name);
        if (!by.count(key)) order.push_back(key);
        by[key].push_back(&c);
      }
    }
    for (const auto& key : order) {
      const auto& v = by[key];
      cmp::CheckResult r;
      r.case_name = key.first;
      r.tensor = key.second;
      r.group = "determinism";
      r.stage = v.front()->stage;
      r.file = v.front()->file;
      r.kind = CompareKind::topk_set;
      if (v.size() < 2) {
        r.verdict = cmp::Verdict::ERROR;
        r.message = "--deterministic needs >= 2 dumps of case '" + key.first + "' across the given files; found 1";
      } else {
        const Tensor& a = v.front()->outputs.at(key.second);
        std::vector<std::string> diff;
        for (std::size_t i = 1; i < v.size(); ++i) {
          const Tensor& t = v[i]->outputs.at(key.second);
          if (!a.same_bytes(t)) diff.push_back(v[i]->file);
        }
        r.numel = a.numel();
        r.mismatches = static_cast<std::int64_t>(diff.size());
        r.verdict = diff.empty() ? cmp::Verdict::BITEXACT : cmp::Verdict::FAIL;
        r.message = diff.empty() ? "identical index tensors (order included) in " + std::to_string(v.size()) + " dumps"
                                 : std::to_string(diff.size()) + " of " + std::to_string(v.size() - 1) +
                                       " dump(s) differ from " + v.front()->file + " (order included); first: " + diff.front();
      }
      rep.results.push_back(std::move(r));
    }
  }
  // Cross-case consistency of the stages that declare it (Stage::cross_check), over every valid case read whose
  // outputs have dtypes of their stage's schema (another dtype is judged DTYPE by the local checks).
  auto outputs_conform = [](const Case& c) {
    const Stage* st = find_stage(c.stage);
    if (!st) return false;
    for (const auto& kv : c.outputs) {  // (not a structured binding: clang 14, the fuzz build, cannot capture one)
      const std::string& n = kv.first;
      const Tensor& t = kv.second;
      if (!t.defined() && !t.is_deferred()) continue;  // a shell's
      const auto os = std::find_if(st->schema.outputs.begin(), st->schema.outputs.end(), [&](const OutputSpec& x) { return x.tensor.name == n; });
      if (os == st->schema.outputs.end() ||
          std::find(os->tensor.dtypes.begin(), os->tensor.dtypes.end(), t.dtype()) == os->tensor.dtypes.end())
        return false;
    }
    return true;
  };
  for (const Stage& st : stages()) {
    if (!st.cross_check) continue;
    std::vector<const Case*> mine;
    for (std::size_t i = 0; i < cases.size(); ++i)
      if (params[i] && !cases[i].outputs.empty() && outputs_conform(cases[i]) &&
          (cases[i].stage == st.name || std::find(st.cross_with.begin(), st.cross_with.end(), cases[i].stage) != st.cross_with.end()))
        mine.push_back(&cases[i]);
    if (mine.size() < 2) continue;
    for (auto& r : st.cross_check(mine)) rep.results.push_back(std::move(r));
  }
  if (o.check.invariance) invariance_results(cases, rep.results);
}

}  // namespace

RunReport run_checks(const RunOptions& o, const ProgressFn& progress) {
  RunReport rep;
  // Files are read and checked in batches (whole files: a layer never spans files); after its local checks a case is
  // kept for the run-wide checks in full only when one of them can read its tensors, else as a shell.
  std::vector<Case> run_cases;
  std::vector<ParamsPtr> run_params;
  Progress prog;
  prog.fn = &progress;
  prog.files = o.files.size();
  const std::size_t batch_cases = static_cast<std::size_t>(std::max(64, 8 * o.jobs));
  const std::int64_t batch_bytes = std::int64_t{256} << 20;
  Batch b;
  std::int64_t b_bytes = 0;
  auto flush = [&] {
    if (b.cases.empty()) return;
    check_batch(b, o, rep, prog);
    for (std::size_t i = 0; i < b.cases.size(); ++i) {
      run_params.push_back(b.params[i]);
      run_cases.push_back(run_wide_needs_tensors(b.cases[i], o) ? std::move(b.cases[i]) : shell_of(std::move(b.cases[i])));
    }
    b = Batch{};
    b_bytes = 0;
  };
  for (std::size_t fi = 0; fi < o.files.size(); ++fi) {
    const std::string& f = o.files[fi];
    ++prog.files_read;
    if (auto e = io::input_file_problem(f); e == "no such file") {  // (other kinds are reported by the reader)
      rep.problems.push_back(f + ": no such file");
      continue;
    }
    io::ReadOptions ro = read_options();
    if (o.max_memory > 0) ro.max_total_bytes = o.max_memory;
    ro.defer = [&o](const Case& c, const std::string&, const std::string& tensor, std::int64_t nbytes) {
      const Stage* st = find_stage(c.stage);
      return st && st->tiling && st->tiling->tensor == tensor && nbytes > o.stream_over;
    };
    std::map<std::string, ParamsPtr> parsed;  // by case name (unique within a file)
    ro.validate = [&parsed](const Case& c, bool check_outputs) {
      BoundCase bc;
      auto p = validate_case(c, check_outputs, &bc);
      if (p.empty()) parsed[c.name] = bc.params;
      return p;
    };
    const auto t_read = std::chrono::steady_clock::now();
    io::ReadResult rr = load_file(f, ro);
    timing_line("read " + f, t_read);
    std::set<std::string> bad;
    for (const auto& p : rr.problems) {
      rep.problems.push_back(p.str());
      bad.insert(p.case_name);
    }
    std::vector<Case> kept;
    std::vector<std::int64_t> kept_pos;
    for (std::size_t ci = 0; ci < rr.cases.size(); ++ci) {
      Case& c = rr.cases[ci];
      if (bad.count(c.name)) continue;  // reported above; not checked
      if (!o.stage_glob.empty() && ::fnmatch(o.stage_glob.c_str(), c.stage.c_str(), 0) != 0) continue;
      if (!o.case_glob.empty() && ::fnmatch(o.case_glob.c_str(), c.name.c_str(), 0) != 0) continue;
      kept.push_back(std::move(c));
      kept_pos.push_back(static_cast<std::int64_t>(ci));
    }
    // Shards: a layer's cases stay together (the shard of its first case in pipeline order).
    std::vector<std::string> shard_key(kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) shard_key[i] = kept[i].name;
    if (o.shard_count > 1)
      for (const auto& l : find_layers(kept))
        for (std::size_t i : l.order) shard_key[i] = kept[l.order.front()].name;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      Case& c = kept[i];
      if (o.shard_count > 1 && shard_of(f, shard_key[i], o.shard_count) != o.shard_index) continue;
      for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
        for (const auto& kv : *g) b_bytes += static_cast<std::int64_t>(kv.second.defined() ? kv.second.nbytes() : 0);
      b.params.push_back(parsed.count(c.name) ? parsed[c.name] : nullptr);
      b.pos.emplace_back(static_cast<std::int64_t>(fi), kept_pos[i]);
      b.cases.push_back(std::move(c));
      ++prog.read;
    }
    if (b.cases.size() >= batch_cases || b_bytes >= batch_bytes) flush();
  }
  flush();
  if (run_cases.empty() && rep.problems.empty())
    if (o.shard_count <= 1)
      rep.problems.push_back("no case to check" + std::string(o.stage_glob.empty() && o.case_glob.empty() ? "" : " (after --stage/--case filters)"));
  run_wide_checks(run_cases, run_params, o, rep);
  rep.divergences = first_divergence(rep.results);
  return rep;
}

RunReport check_cases(std::vector<Case> cases, const RunOptions& o) {
  RunReport rep;
  Batch b;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    BoundCase bc;
    const auto problems = validate_case(cases[i], true, &bc);
    for (const auto& p : problems) rep.problems.push_back(p.str());
    if (!problems.empty()) continue;
    b.params.push_back(bc.params);
    b.pos.emplace_back(0, static_cast<std::int64_t>(i));
    b.cases.push_back(std::move(cases[i]));
  }
  ProgressFn none;
  Progress prog;
  prog.fn = &none;
  check_batch(b, o, rep, prog);
  run_wide_checks(b.cases, b.params, o, rep);
  rep.divergences = first_divergence(rep.results);
  return rep;
}

namespace {
// The JSON nesting depth of `text` (strings skipped); stops counting at `limit` + 1.
int json_depth(const std::string& text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_str = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_str) {
      if (ch == '\\') ++i;
      else if (ch == '"') in_str = false;
    } else if (ch == '"') {
      in_str = true;
    } else if (ch == '[' || ch == '{') {
      if ((max_depth = std::max(max_depth, ++depth)) > limit) return max_depth;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return max_depth;
}
}  // namespace

RunReport merge_reports(const std::vector<std::string>& files, std::vector<std::string>& errors, std::int64_t max_report_bytes) {
  RunReport rep;
  const std::string want = "expected a report written by dsa-check check --json";
  for (const auto& f : files) {
    if (auto e = io::input_file_problem(f); !e.empty()) {
      errors.push_back(f + ": " + e);
      continue;
    }
    // Bounded memory: the size is checked before a byte is read, the nesting depth before parsing.
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(f, ec);
    if (ec) {
      errors.push_back(f + ": cannot read its size (" + ec.message() + ")");
      continue;
    }
    if (size > static_cast<std::uintmax_t>(max_report_bytes)) {
      errors.push_back(f + ": " + want + " of at most " + std::to_string(max_report_bytes) + " bytes (--max-report-mib), found " +
                       std::to_string(size) + " bytes; not read");
      continue;
    }
    std::string text;
    {
      std::ifstream in(f, std::ios::binary);
      text.resize(static_cast<std::size_t>(size));
      in.read(text.data(), static_cast<std::streamsize>(size));
      if (!in && !in.eof()) {
        errors.push_back(f + ": read failed (" + std::string(std::strerror(errno)) + ")");
        continue;
      }
      text.resize(static_cast<std::size_t>(in.gcount()));
    }
    if (const int d = json_depth(text, kMaxReportDepth); d > kMaxReportDepth) {
      errors.push_back(f + ": " + want + " (JSON nested at most " + std::to_string(kMaxReportDepth) + " deep), found deeper nesting; not parsed");
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      std::string m = e.what();
      if (const auto k = m.find("] "); m.rfind("[json.exception", 0) == 0 && k != std::string::npos) m = m.substr(k + 2);
      errors.push_back(f + ": " + want + ", found invalid JSON (" + (text.empty() ? std::string("an empty file") : m) + ")");
      continue;
    }
    std::string().swap(text);
    if (!j.is_object()) {
      errors.push_back(f + ": " + want + " (a JSON object), found a JSON " + j.type_name());
      continue;
    }
    if (!j.contains("tool") || !j["tool"].is_string() || j["tool"].get<std::string>() != "dsa-check") {
      errors.push_back(f + ": " + want + " (\"tool\": \"dsa-check\"), found " +
                       (j.contains("tool") ? "\"tool\": " + j["tool"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 60)
                                           : std::string("no \"tool\" field")));
      continue;
    }
    const std::size_t n_results0 = rep.results.size(), n_problems0 = rep.problems.size();
    std::string field;
    try {
      for (const char* k : {"problems", "results"})
        if (!j.contains(k) || !j[k].is_array())
          throw std::runtime_error(std::string(k) + ": expected an array, found " + (j.contains(k) ? std::string("a ") + j[k].type_name() : "nothing (missing)"));
      const auto& probs = j["problems"];
      for (std::size_t i = 0; i < probs.size(); ++i) {
        if (!probs[i].is_string()) throw std::runtime_error("problems[" + std::to_string(i) + "]: expected a string, found a " + probs[i].type_name());
        rep.problems.push_back(probs[i].get<std::string>());
      }
      const auto& res = j["results"];
      for (std::size_t i = 0; i < res.size(); ++i) {
        field = "results[" + std::to_string(i) + "]: ";
        rep.results.push_back(cmp::from_json(res[i]));
      }
    } catch (const std::exception& e) {
      errors.push_back(f + ": " + field + e.what());
      rep.results.resize(n_results0);  // nothing of a file that does not read whole
      rep.problems.resize(n_problems0);
    }
  }
  // The full run's order (file, then case; a layer together where its first case stands), whatever the shards'
  // order; run-level results (no position) after them, in their given order.
  std::stable_sort(rep.results.begin(), rep.results.end(), [](const cmp::CheckResult& a, const cmp::CheckResult& b) {
    auto key = [](const cmp::CheckResult& r) {
      return r.file_pos < 0 ? std::make_pair(INT64_MAX, INT64_MAX) : std::make_pair(r.file_pos, r.case_pos);
    };
    return key(a) < key(b);
  });
  rep.divergences = first_divergence(rep.results);
  return rep;
}

namespace {
// The report title: the checked (or merged) files.
std::string report_title(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return "(no file)";
  std::string t = std::filesystem::path(inputs.front()).filename().string();
  return inputs.size() == 1 ? t : t + " and " + std::to_string(inputs.size() - 1) + " more file(s)";
}

int write_reports(const RunReport& rep, const std::string& json_path, const std::string& junit_path,
                  const std::vector<std::string>& inputs, std::ostream& err, const std::string& html_path = "") {
  int rc = 0;
  if (!html_path.empty())
    if (auto e = io::write_text_atomic(html_path, report::html_report(rep, report_title(inputs)), inputs); !e.empty()) {
      err << "error: " << e << "\n";
      rc = 2;
    }
  if (!json_path.empty())
    if (auto e = io::write_text_atomic(json_path, io::json_text(report::report_json(rep)), inputs); !e.empty()) {
      err << "error: " << e << "\n";
      rc = 2;
    }
  if (!junit_path.empty())
    if (auto e = io::write_text_atomic(junit_path, report::junit_xml(rep), inputs); !e.empty()) {
      err << "error: " << e << "\n";
      rc = 2;
    }
  return rc;
}
}  // namespace

int run_merge_command(const std::vector<std::string>& files, const std::string& json_path, const std::string& junit_path,
                      bool quiet, std::ostream& out, std::ostream& err, const std::string& html_path, std::int64_t max_report_bytes) {
  std::vector<std::string> errors;
  const RunReport rep = merge_reports(files, errors, max_report_bytes);
  for (const auto& e : errors) err << "error: " << printable(e) << "\n";
  for (const auto& p : rep.problems) err << "error: " << p << "\n";
  report::print_console(rep, out, quiet, 0, false);
  if (!errors.empty()) {  // a merged report missing a shard would pass for the whole run: write none
    if (!json_path.empty() || !junit_path.empty() || !html_path.empty())
      err << "error: no report written: " << errors.size() << " of " << files.size() << " input report(s) could not be read\n";
    return 2;
  }
  return std::max(rep.exit_code(), write_reports(rep, json_path, junit_path, files, err, html_path));
}

int run_check_command(const RunOptions& o, std::ostream& out, std::ostream& err) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool tty_err = ::isatty(2) != 0;
  std::atomic<bool> progressed{false};
  // On a TTY only (quiet in CI logs and pipes), once the run has taken 2 s: cases done, rate, ETA, the last case.
  auto progress = [&](std::size_t d, std::size_t n, const Case& c) {
    if (!tty_err) return;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sec < 2.0) return;
    const double rate = static_cast<double>(d) / sec;
    const double eta = rate > 0 ? static_cast<double>(n - d) / rate : 0.0;
    std::fprintf(stderr, "\r\033[Kchecked %zu/%zu case(s), %.1f/s, ETA %.0f s; last: %s [%s]", d, n, rate, eta,
                 printable(c.name).c_str(), printable(c.stage).c_str());
    std::fflush(stderr);
    progressed = true;
  };
  // Within a streamed case (row tiles): rows done, rate and ETA of that case.
  RunOptions ro = o;
  ro.check.plots = ro.check.plots || !o.html_path.empty();
  std::mutex pm;
  // keyed by file and case name: cases are freed batch by batch, so an address may come back for another case
  std::map<std::pair<std::string, std::string>, std::chrono::steady_clock::time_point> case_t0;
  ro.check.row_progress = [&](const Case& c, std::int64_t done, std::int64_t rows) {
    if (!tty_err) return;
    std::lock_guard<std::mutex> lk(pm);
    const auto now = std::chrono::steady_clock::now();
    auto it = case_t0.try_emplace({c.file, c.name}, now).first;
    if (std::chrono::duration<double>(now - t0).count() < 2.0) return;
    const double sec = std::max(1e-9, std::chrono::duration<double>(now - it->second).count());
    const double rate = static_cast<double>(done) / sec;
    const double eta = rate > 0 ? static_cast<double>(rows - done) / rate : 0.0;
    std::fprintf(stderr, "\r\033[K%s [%s]: %lld/%lld rows, %.0f rows/s, ETA %.0f s", printable(c.name).c_str(),
                 printable(c.stage).c_str(), static_cast<long long>(done), static_cast<long long>(rows), rate, eta);
    std::fflush(stderr);
    progressed = true;
  };
  RunReport rep = run_checks(ro, progress);
  if (progressed) std::fprintf(stderr, "\n");
  for (const auto& p : rep.problems) err << "error: " << p << "\n";
  const bool color = o.color < 0 ? ::isatty(1) != 0 : o.color == 1;
  report::print_console(rep, out, o.quiet, o.verbose, color);
  int rc = rep.exit_code();
  rc = std::max(rc, write_reports(rep, o.json_path, o.junit_path, o.files, err, o.html_path));
  timing_line("check in all (reads, references, comparisons, reports)", t0);
  return rc;
}

}  // namespace dsa::pipeline
