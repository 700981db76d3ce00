#include "schema/schema.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

namespace dsa {

std::string_view attr_type_name(AttrType t) {
  switch (t) {
    case AttrType::integer: return "int";
    case AttrType::number: return "float";
    case AttrType::string: return "string";
    case AttrType::boolean: return "bool";
  }
  return "?";
}

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : s) {
    if (ch == sep) {
      out.push_back(cur);
      cur.clear();
    } else if (!std::isspace(static_cast<unsigned char>(ch))) {
      cur.push_back(ch);
    }
  }
  out.push_back(cur);
  return out;
}

bool is_int_literal(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

using Bindings = std::map<std::string, std::int64_t>;

// Evaluate a dim token given bindings; returns nullopt if a symbol is unbound. A single unbound symbol can be
// bound by the caller.
std::optional<std::int64_t> eval_dim(const std::string& tok, const Bindings& b) {
  if (tok == "?") return std::nullopt;
  std::int64_t prod = 1;
  for (const auto& f : split(tok, '*')) {
    if (is_int_literal(f)) {
      prod *= std::stoll(f);
    } else {
      auto it = b.find(f);
      if (it == b.end()) return std::nullopt;
      prod *= it->second;
    }
  }
  return prod;
}

std::string dtype_list(const std::vector<DType>& ds) {
  std::string s;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    s += (i ? (i + 1 == ds.size() ? " or " : ", ") : "");
    s += dtype_name(ds[i]);
  }
  return s;
}

// The found dtype, with a hint when it looks like raw bits whose `dtype` attribute was forgotten.
std::string dtype_found(const TensorSpec& spec, DType found) {
  std::string s(dtype_name(found));
  for (DType want : spec.dtypes) {
    if (dtype_stored_as_bits(want) && dtype_size(want) == dtype_size(found) && dtype_is_integer(found)) {
      s += " (raw bits without a dtype attribute? add the string attribute dtype=\"" + std::string(dtype_name(want)) +
           "\" to the dataset)";
      break;
    }
  }
  return s;
}

struct Binder {
  const Case& c;
  std::vector<Problem>& problems;
  Bindings bind;
  std::map<std::string, std::string> bound_by;  // symbol -> "inputs/q dim 0"

  // Match `t` against one alternative; on success commit bindings, else describe the mismatch.
  bool match(const std::string& path, const Tensor& t, const std::string& alt, std::string& why, bool commit) {
    const auto toks = split(alt, ',');
    const std::size_t rank = alt.empty() ? 0 : toks.size();
    if (static_cast<std::size_t>(t.rank()) != rank) {
      why = "rank " + std::to_string(rank) + " [" + alt + "], found rank " + std::to_string(t.rank()) + " " +
            shape_str(t.shape());
      return false;
    }
    Bindings local = bind;
    std::map<std::string, std::string> local_by = bound_by;
    for (std::size_t i = 0; i < rank; ++i) {
      const std::string& tok = toks[i];
      const std::int64_t d = t.shape()[i];
      if (auto v = eval_dim(tok, local)) {
        if (*v != d) {
          why = "dim " + std::to_string(i) + " = " + tok + " = " + std::to_string(*v) +
                (local_by.count(tok) ? " (from " + local_by[tok] + ")" : "") + " of shape [" + alt + "], found " +
                std::to_string(d) + " in " + shape_str(t.shape());
          return false;
        }
      } else if (tok != "?" && tok.find('*') == std::string::npos) {
        local[tok] = d;
        local_by[tok] = path + " dim " + std::to_string(i);
      }
    }
    if (commit) {
      bind = std::move(local);
      bound_by = std::move(local_by);
    }
    return true;
  }

  void check(const std::string& group, const TensorSpec& spec, const Tensor* t) {
    const std::string path = group + "/" + spec.name;
    if (!t) {
      if (!spec.optional) problems.push_back({c.file, c.name, path, "a " + dtype_list(spec.dtypes) + " tensor", "none"});
      return;
    }
    // A kernel output (or a golden's expected/ tensor) of another dtype is not an unreadable file but a wrong result:
    // check judges it (verdict DTYPE, exit 1, naming the expected and found dtypes), like one of another dtype that
    // the schema allows but the case does not (one behaviour). Inputs must have a dtype the stage reads.
    if (group == "inputs" && std::find(spec.dtypes.begin(), spec.dtypes.end(), t->dtype()) == spec.dtypes.end()) {
      problems.push_back({c.file, c.name, path, "dtype " + dtype_list(spec.dtypes), dtype_found(spec, t->dtype())});
    }
    if (t->numel() == 0)
      problems.push_back({c.file, c.name, path, "a non-empty tensor", "shape " + shape_str(t->shape()) + " (0 elements)"});
    std::string why;
    for (const auto& alt : spec.dims) {
      std::string w;
      if (match(path, *t, alt, w, true)) return;
      why += (why.empty() ? "" : "; or ") + w;
    }
    problems.push_back({c.file, c.name, path, why, ""});
  }
};

// Levenshtein distance (names are short).
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool attr_type_ok(const AttrSpec& a, const AttrValue& v) {
  switch (a.type) {
    case AttrType::integer: return std::holds_alternative<std::int64_t>(v);
    case AttrType::number: return std::holds_alternative<double>(v) || std::holds_alternative<std::int64_t>(v);
    case AttrType::string: return std::holds_alternative<std::string>(v);
    case AttrType::boolean: {
      if (auto p = std::get_if<std::int64_t>(&v)) return *p == 0 || *p == 1;
      if (auto s = std::get_if<std::string>(&v)) return *s == "true" || *s == "false" || *s == "True" || *s == "False";
      return false;
    }
  }
  return false;
}

std::string choice_value(const AttrValue& v) {
  if (auto s = std::get_if<std::string>(&v)) return *s;
  if (auto i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return attr_to_string(v);
}

}  // namespace

std::string closest_name(const std::string& name, const std::vector<std::string>& known) {
  const std::string* best = nullptr;
  std::size_t best_d = 99;
  for (const auto& k : known)
    if (const std::size_t d = edit_distance(name, k); d < best_d) best_d = d, best = &k;
  // A near miss: a few edits, or one name inside the other (scale_format / scale_fmt).
  const bool near = best && (best_d * 3 <= std::max(best->size(), name.size()) || name.find(*best) != std::string::npos ||
                             best->find(name) != std::string::npos);
  return near ? *best : std::string();
}

const std::vector<ProvenanceAttr>& provenance_attrs() {
  static const std::vector<ProvenanceAttr> v = {
      {"layer", "model layer of the call (layer checks, across-call consistency keys)"},
      {"step", "decode step / call index within a layer (layer dumps, across-call consistency)"},
      {"request_ids", "one request id per row: rows repeated across calls are compared (logits, top-k)"},
      {"topk_source_layer", "the layer whose top-k this layer reuses (V4 shared indexer; attn.v4_sparse reads it too)"},
      {"candidate_source_layer", "the layer whose published candidate blocks this consumer reads (V4.1: 20; v41.select / v41.logits)"},
      {"dsl_expand_factor", "CuTe-DSL paged logits: work split of the target-verify expansion (provenance only)"},
      {"dsl_atom", "CuTe-DSL paged logits: work split (provenance only)"},
      {"golden_generator", "golden: the generator that built the inputs"},
      {"golden_seed", "golden: the generator's seed"},
      {"demo_bug", "demo files: the planted bug"},
      {"mutant_bug", "selftest files: the mutant's bug"},
      {"expected_by", "who computed expected/ (dsa-check expect)"},
  };
  return v;
}

bool is_provenance_attr(const std::string& name) {
  if (name.rfind(kUserAttrPrefix, 0) == 0 && name.size() > std::char_traits<char>::length(kUserAttrPrefix)) return true;
  for (const auto& p : provenance_attrs())
    if (name == p.name) return true;
  return false;
}

std::vector<Problem> validate_schema(const Case& c, const Schema& sc, bool check_outputs) {
  std::vector<Problem> problems;
  const Schema* st = &sc;
  // Attributes.
  for (const auto& a : st->attrs) {
    auto it = c.attrs.find(a.name);
    if (it == c.attrs.end()) {
      if (a.required)
        problems.push_back({c.file, c.name, "attr " + a.name, std::string("a ") + std::string(attr_type_name(a.type)), "none"});
      continue;
    }
    if (!attr_type_ok(a, it->second)) {
      problems.push_back({c.file, c.name, "attr " + a.name, std::string(attr_type_name(a.type)), attr_to_string(it->second)});
      continue;
    }
    if (!a.choices.empty()) {
      const std::string v = choice_value(it->second);
      if (std::find(a.choices.begin(), a.choices.end(), v) == a.choices.end()) {
        std::string ch;
        for (const auto& x : a.choices) ch += (ch.empty() ? "" : "|") + x;
        problems.push_back({c.file, c.name, "attr " + a.name, "one of " + ch, "'" + v + "'"});
      }
    }
  }
  // An attr the stage does not declare is an error unless it is provenance or user metadata (meta.*): `scale_format`
  // would otherwise silently leave scale_fmt at its default and the check would blame the kernel.
  for (const auto& [name, v] : c.attrs) {
    (void)v;
    if (st->attr(name) || is_provenance_attr(name)) continue;
    std::vector<std::string> known;
    for (const auto& a : st->attrs) known.push_back(a.name);
    const std::string best = closest_name(name, known);
    std::string names;
    for (const auto& a : st->attrs) names += (names.empty() ? "" : ", ") + a.name;
    std::string exp = "an attr of stage " + c.stage + (!best.empty() ? " (did you mean " + best + "?)" : std::string()) + ": " +
                      (names.empty() ? std::string("it has none") : names) +
                      "; or provenance (layer, step, request_ids, ...: docs/dump-format.md); or user metadata under " +
                      kUserAttrPrefix + "*";
    problems.push_back({c.file, c.name, "attr " + name, exp, "an attr the stage does not read"});
  }
  // Tensors. Integer attrs bind symbols of the same name first.
  Binder b{c, problems, {}, {}};
  for (const auto& [k, v] : c.attrs)
    if (auto p = std::get_if<std::int64_t>(&v)) {
      b.bind[k] = *p;
      b.bound_by[k] = "attr " + k;
    }
  auto check_group = [&](const std::string& group, const TensorMap& m, const std::vector<const TensorSpec*>& specs) {
    for (const auto* s : specs) {
      auto it = m.find(s->name);
      b.check(group, *s, it == m.end() ? nullptr : &it->second);
    }
    for (const auto& entry : m) {
      const std::string& name = entry.first;  // not a structured binding: clang 14 (the fuzz build) cannot capture one
      bool known = std::any_of(specs.begin(), specs.end(), [&](const TensorSpec* s) { return s->name == name; });
      if (!known) {
        std::string names;
        for (const auto* s : specs) names += (names.empty() ? "" : ", ") + s->name;
        problems.push_back({c.file, c.name, group + "/" + name, "one of the stage's tensors (" + names + ")", "an unknown tensor"});
      }
    }
  };
  std::vector<const TensorSpec*> in_specs, out_specs;
  for (const auto& s : st->inputs) in_specs.push_back(&s);
  for (const auto& o : st->outputs) out_specs.push_back(&o.tensor);  // each optional in a dump (see below)
  check_group("inputs", c.inputs, in_specs);
  if (check_outputs) {
    std::vector<TensorSpec> relaxed;
    relaxed.reserve(out_specs.size());
    for (const auto* s : out_specs) {
      relaxed.push_back(*s);
      relaxed.back().optional = true;
    }
    std::vector<const TensorSpec*> rel;
    for (const auto& s : relaxed) rel.push_back(&s);
    if (!c.outputs.empty()) check_group("outputs", c.outputs, rel);
    if (!c.expected.empty()) check_group("expected", c.expected, rel);
  }
  return problems;
}

const AttrSpec* Schema::attr(const std::string& name) const {
  for (const auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

AttrSpec int_attr(std::string n, std::int64_t def, std::string doc) {
  return {std::move(n), AttrType::integer, false, AttrValue{def}, {}, std::move(doc)};
}
AttrSpec required_int_attr(std::string n, std::string doc) {
  return {std::move(n), AttrType::integer, true, std::nullopt, {}, std::move(doc)};
}
AttrSpec num_attr(std::string n, double def, std::string doc) {
  return {std::move(n), AttrType::number, false, AttrValue{def}, {}, std::move(doc)};
}
AttrSpec bool_attr(std::string n, bool def, std::string doc) {
  return {std::move(n), AttrType::boolean, false, AttrValue{std::int64_t{def ? 1 : 0}}, {}, std::move(doc)};
}
AttrSpec str_attr(std::string n, std::string def, std::vector<std::string> choices, std::string doc) {
  return {std::move(n), AttrType::string, false, AttrValue{std::move(def)}, std::move(choices), std::move(doc)};
}
AttrSpec opt_str_attr(std::string n, std::vector<std::string> choices, std::string doc) {
  return {std::move(n), AttrType::string, false, std::nullopt, std::move(choices), std::move(doc)};
}
AttrSpec opt_int_attr(std::string n, std::string doc) { return {std::move(n), AttrType::integer, false, std::nullopt, {}, std::move(doc)}; }
AttrSpec opt_bool_attr(std::string n, std::string doc) { return {std::move(n), AttrType::boolean, false, std::nullopt, {}, std::move(doc)}; }

void apply_attr_defaults(Case& c, const Schema& s) {
  for (const auto& a : s.attrs)
    if (!c.has_attr(a.name) && a.default_value) c.attrs[a.name] = *a.default_value;
}

const AttrValue* AttrReader::value(const std::string& name) const {
  const AttrSpec* a = s_.attr(name);
  if (!a) throw std::logic_error("stage '" + c_.stage + "' reads attr '" + name + "' that its schema does not declare");
  auto it = c_.attrs.find(name);
  if (it != c_.attrs.end()) return &it->second;
  if (a->default_value) return &*a->default_value;
  throw SchemaError(Problem{c_.file, c_.name, "attr " + name, std::string("a ") + std::string(attr_type_name(a->type)), "none"});
}

bool AttrReader::has(const std::string& name) const {
  if (!s_.attr(name)) throw std::logic_error("stage '" + c_.stage + "' reads attr '" + name + "' that its schema does not declare");
  return c_.has_attr(name);
}

std::int64_t AttrReader::i(const std::string& name) const { return attr_as_int(c_, name, *value(name)); }
double AttrReader::f(const std::string& name) const { return attr_as_float(c_, name, *value(name)); }
std::string AttrReader::s(const std::string& name) const { return attr_as_str(c_, name, *value(name)); }
bool AttrReader::b(const std::string& name) const { return attr_as_bool(c_, name, *value(name)); }

void check_finite_attr(const Case& c, const AttrReader& a, const std::string& name, bool positive, std::vector<Problem>& p) {
  const double v = a.f(name);
  if (!std::isfinite(v) || v < 0.0 || (positive && v == 0.0))
    p.push_back({c.file, c.name, "attr " + name, positive ? "a finite number > 0" : "a finite number >= 0", attr_to_string(AttrValue{v})});
}

}  // namespace dsa
