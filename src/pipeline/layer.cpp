#include "pipeline/layer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "pipeline/timing.hpp"
#include "stage/stage.hpp"

namespace dsa::pipeline {

namespace {

std::string source_case(const std::string& src) { return src.substr(0, src.find('/')); }

// The case's attr `layer` as text ("" when absent).
std::string layer_attr(const Case& c) {
  if (!c.has_attr("layer")) return "";
  const AttrValue& v = c.attrs.at("layer");
  return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : attr_to_string(v);
}

// What the chain hands downstream for one upstream tensor ("CASE/GROUP/TENSOR").
struct ChainValue {
  Tensor value;
  Tensor bounds;     // f64 per element, or undefined (exact)
  std::string note;  // said on the consumer's end-to-end results
};

// Per-element bound rtol * M + atol of a bounded reference tensor (0 where undefined or non-finite).
Tensor bound_tensor(const RefTensor& r, const cmp::Tolerance& tol) {
  const std::int64_t n = r.value.numel();
  Tensor b(DType::f64, r.value.shape());
  double* d = b.data<double>();
  const bool has_m = r.magnitude.defined() && r.magnitude.numel() == n;
  const bool has_def = r.defined.defined() && r.defined.numel() == n;
  for (std::int64_t i = 0; i < n; ++i) {
    const double v = r.value.value(i);
    const double m = has_m ? r.magnitude.data<double>()[i] : std::fabs(v);
    d[i] = (has_def && !r.defined.data<std::uint8_t>()[i]) || !std::isfinite(v) || !std::isfinite(m) ? 0.0 : tol.rtol * std::fabs(m) + tol.atol;
  }
  return b;
}

bool any_positive(const Tensor& b) {
  for (std::int64_t i = 0; i < b.numel(); ++i)
    if (b.data<double>()[i] > 0) return true;
  return false;
}

}  // namespace

std::vector<Layer> find_layers(const std::vector<Case>& cases) {
  // Union-find over the cases (iterative, path halving: a long chain of cases costs no recursion).
  std::map<std::pair<std::string, std::string>, std::size_t> idx;
  for (std::size_t i = 0; i < cases.size(); ++i) idx.emplace(std::make_pair(cases[i].file, cases[i].name), i);
  std::vector<std::size_t> parent(cases.size());
  for (std::size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto root = [&](std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::vector<std::vector<std::size_t>> ups(cases.size()), downs(cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i)
    for (const auto& [in, src] : cases[i].links) {
      auto it = idx.find({cases[i].file, source_case(src)});
      if (it == idx.end() || it->second == i) continue;
      ups[i].push_back(it->second);
      downs[it->second].push_back(i);
      parent[root(i)] = root(it->second);
    }
  std::map<std::size_t, std::vector<std::size_t>> comps;
  for (std::size_t i = 0; i < cases.size(); ++i) comps[root(i)].push_back(i);
  auto po = [&](std::size_t i) {
    const Stage* st = find_stage(cases[i].stage);
    return st ? st->pipeline_order : 1 << 20;
  };
  std::vector<Layer> out;
  for (auto& [r, members] : comps) {
    if (members.size() < 2) continue;
    // Kahn's order: a case once every upstream is placed; among the ready ones the lowest stage pipeline_order, then
    // file order. (The reader refused cycles; a leftover would be appended in file order.)
    std::map<std::size_t, std::size_t> pending;  // case -> upstream links not yet placed
    std::set<std::pair<int, std::size_t>> ready;
    for (std::size_t i : members) {
      pending[i] = ups[i].size();
      if (ups[i].empty()) ready.insert({po(i), i});
    }
    Layer l;
    std::set<std::size_t> placed;
    while (!ready.empty()) {
      const std::size_t i = ready.begin()->second;
      ready.erase(ready.begin());
      l.order.push_back(i);
      placed.insert(i);
      for (std::size_t d : downs[i])
        if (--pending[d] == 0) ready.insert({po(d), d});
    }
    for (std::size_t i : members)
      if (!placed.count(i)) l.order.push_back(i);
    std::string shared = layer_attr(cases[l.order.front()]);
    for (std::size_t i : l.order)
      if (layer_attr(cases[i]) != shared) shared.clear();
    l.name = shared.empty() ? cases[l.order.front()].name : shared;
    out.push_back(std::move(l));
  }
  std::sort(out.begin(), out.end(), [](const Layer& a, const Layer& b) { return a.order.front() < b.order.front(); });
  return out;
}

std::vector<std::vector<cmp::CheckResult>> check_layer(const Layer& l, const std::vector<Case>& cases,
                                                       const std::vector<ParamsPtr>& params, const CheckOptions& o) {
  std::vector<std::vector<cmp::CheckResult>> out(l.order.size());
  std::map<std::string, ChainValue> chain;  // "CASE/GROUP/TENSOR" -> what the chain hands downstream
  std::set<std::string> linked;             // the "CASE/GROUP/TENSOR" some member reads: the only ones handed on
  for (std::size_t i : l.order)
    for (const auto& [in, src] : cases[i].links) linked.insert(src);
  for (std::size_t pos = 0; pos < l.order.size(); ++pos) {
    const std::size_t i = l.order[pos];
    const Case& c = cases[i];
    auto& res = out[pos];
    auto tag = [&](std::vector<cmp::CheckResult>& v) {
      for (auto& r : v) {
        r.layer = l.name;
        r.layer_pos = static_cast<std::int64_t>(pos);
      }
    };
    const Stage* st = find_stage(c.stage);
    bool deferred = false;
    for (const auto* g : {&c.outputs, &c.expected})
      for (const auto& [n, t] : *g) deferred = deferred || t.is_deferred();
    if (!params[i] || !st || deferred) {  // checked alone; the chain stops here
      res = params[i] && st ? check_case(BoundCase{&c, st, params[i], kernel_profile(c)}, o) : check_case(c, o);
      if (deferred && !res.empty())
        res.front().notes.push_back("layer " + l.name + ": outputs streamed in row tiles; the end-to-end chain stops at this case");
      tag(res);
      continue;
    }
    const BoundCase b{&c, st, params[i], kernel_profile(c)};
    const RefOptions ro = reference_options(b, o);
    Expected local;
    const std::string where = "layer " + l.name + " case '" + c.name + "'";
    auto t0 = std::chrono::steady_clock::now();
    try {
      local = run_reference(b, ro, reference_backend(b, o));
    } catch (const std::exception&) {
      res = check_case(b, o);  // the reference error, reported as check_case does
      tag(res);
      continue;
    }
    timing_line(where + ": reference on the " + std::string(backend_name(reference_backend(b, o))), t0);
    t0 = std::chrono::steady_clock::now();
    res = check_case(b, o, local);
    timing_line(where + ": comparison", t0);
    // The chained case: linked inputs replaced by what the chain computed upstream.
    Case x = c;
    RefOptions xo = ro;
    bool changed = false;
    std::vector<std::string> notes;
    for (const auto& [in, src] : c.links) {
      auto it = chain.find(src);
      auto cur = c.inputs.find(in);
      if (cur == c.inputs.end()) continue;
      if (it == chain.end()) {
        notes.push_back("inputs/" + in + ": its source " + src + " is not checked in this layer; the stored input is used");
        continue;
      }
      const ChainValue& v = it->second;
      if (v.value.numel() != cur->second.numel() || v.value.dtype() != cur->second.dtype()) {
        notes.push_back("inputs/" + in + ": the chain's " + src + " does not fit it; the stored input is used");
        continue;
      }
      Tensor t = v.value.shape() == cur->second.shape() ? v.value : v.value.reshape(cur->second.shape());
      if (!t.same_bytes(cur->second)) changed = true;
      x.inputs[in] = t;
      if (v.bounds.defined() && any_positive(v.bounds)) {
        xo.input_bounds[in] = v.bounds.reshape(cur->second.shape());
        changed = true;
      }
      if (!v.note.empty()) notes.push_back("inputs/" + in + ": " + v.note);
    }
    Expected chained;
    std::vector<cmp::CheckResult> e2e;
    BoundCase bx{&x, st, params[i]};
    if (!changed) {
      chained = local;
      e2e = res;
      notes.insert(notes.begin(), std::string(report::kEndToEndIsLocal) + ": the chain gives this case its stored inputs");
    } else {
      std::vector<Problem> probs = validate_case(x, true, &bx);
      if (!probs.empty()) {
        e2e.push_back(case_error(c, "-", "the reference chain gives this case invalid inputs: " + probs.front().str()));
      } else {
        try {
          t0 = std::chrono::steady_clock::now();
          chained = run_reference(bx, xo, reference_backend(bx, o));
          timing_line(where + ": end-to-end reference", t0);
          t0 = std::chrono::steady_clock::now();
          e2e = check_case(bx, o, chained);
          timing_line(where + ": end-to-end comparison", t0);
        } catch (const std::exception& ex) {
          e2e.push_back(case_error(c, "-", std::string("reference of the chained case failed: ") + ex.what()));
        }
      }
    }
    for (auto& r : e2e) {
      r.group = r.group == "expected" ? "expected end-to-end" : "end-to-end";
      r.informational = true;
      for (auto n = notes.rbegin(); n != notes.rend(); ++n) r.notes.insert(r.notes.begin(), *n);
    }
    // What this case hands downstream.
    for (const auto& R : chained.tensors)
      for (const auto& [gname, g] : {std::pair<std::string, const TensorMap*>{"outputs", &c.outputs}, {"expected", &c.expected}}) {
        auto kt = g->find(R.name);
        if (kt == g->end() || !linked.count(c.name + "/" + gname + "/" + R.name)) continue;  // nobody reads it: no bound
        ChainValue v;
        v.value = R.value;
        if (R.kind == CompareKind::topk_set) {
          const std::string grp = gname == "expected" ? "expected end-to-end" : "end-to-end";
          const auto r = std::find_if(e2e.begin(), e2e.end(), [&](const cmp::CheckResult& q) { return q.group == grp && q.tensor == R.name; });
          const bool ok = r != e2e.end() && verdict_pass(r->verdict);
          if (ok && !kt->second.same_bytes(R.value)) {
            v.value = kt->second;
            v.note = "on " + c.name + "'s own selection (" + gname + "/" + R.name +
                     ": it differs from the reference chain's only inside the tie band)";
          } else if (!ok && r != e2e.end()) {
            v.note = "on the reference chain's selection (" + c.name + "/" + gname + "/" + R.name + " fails end to end)";
          }
        } else if (R.kind == CompareKind::bounded) {
          v.bounds = bound_tensor(R, resolve_tolerance(bx, R.name, o.tol));
        }
        chain[c.name + "/" + gname + "/" + R.name] = std::move(v);
      }
    res.insert(res.end(), e2e.begin(), e2e.end());
    tag(res);
  }
  return out;
}

}  // namespace dsa::pipeline
