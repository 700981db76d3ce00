#include "stage/stage.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "io/h5io.hpp"

namespace dsa {

std::string_view backend_name(Backend b) { return b == Backend::cpu ? "cpu" : "cuda"; }

const std::vector<std::string>& backend_names() {
  static const std::vector<std::string> names{"cpu", "cuda"};
  return names;
}

std::optional<Backend> parse_backend(std::string_view name) {
  for (Backend b : {Backend::cpu, Backend::cuda})
    if (name == backend_name(b)) return b;
  return std::nullopt;
}

const ImplFn* Stage::impl_for(Backend b) const {
  const ImplFn& f = impl[static_cast<std::size_t>(b)];
  return f ? &f : nullptr;
}

std::vector<std::string> Stage::emulated_by() const {
  std::vector<std::string> v;
  for (const Profile* p : kernel_profiles())
    if (p->emulates(name)) v.push_back(p->name);
  return v;
}

std::vector<Stage> finish_table(std::vector<Stage> lines) {
  int order = 0;
  for (Stage& s : lines) {
    s.pipeline_order = ++order;
    for (AttrSpec& a : profile_attrs(s.name, s.default_profile)) {
      if (!s.profile_doc.empty() && a.name == "kernel") a.doc += "; " + s.profile_doc;
      s.schema.attrs.push_back(std::move(a));
    }
  }
  return lines;
}

const Stage* find_stage(const std::string& name) {
  for (const auto& s : stages())
    if (s.name == name) return &s;
  return nullptr;
}

std::string stage_names() {
  std::string names;
  for (const auto& s : stages()) names += (names.empty() ? "" : ", ") + s.name;
  return names;
}

std::vector<Problem> validate_case(const Case& c, bool check_outputs, BoundCase* bound) {
  const Stage* st = find_stage(c.stage);
  if (!st) return {{c.file, c.name, "attr stage", "one of " + stage_names(), "'" + c.stage + "'"}};
  std::vector<Problem> problems;
  const Profile* profile = resolve_profile(c, st->name, st->default_profile, problems);
  for (Problem& q : validate_schema(c, st->schema, check_outputs))
    if (problems.empty() || (q.tensor != "attr kernel" && q.tensor != "attr variant")) problems.push_back(std::move(q));
  if (!problems.empty()) return problems;
  ParamsPtr p;
  try {
    p = st->parse(c, AttrReader(c, st->schema, profile), problems);
  } catch (const SchemaError& e) {
    problems.push_back(e.problem());
  }
  if (problems.empty() && !p) problems.push_back({c.file, c.name, "", "stage " + st->name + " to parse the case", "no parameters"});
  if (problems.empty() && bound) *bound = BoundCase{&c, st, std::move(p), profile};
  return problems;
}

namespace {

// The CUDA-canonical NaN code of a float format (what sm_90 arithmetic and its cvt instructions write for any NaN):
// f32 0x7FFFFFFF, f64 0x7FFF...F, bf16 / fp16 0x7FFF, e4m3fn / e5m2 0x7F.
template <typename U>
void canonicalize(Tensor& t, U mag_mask, U nan_above, U canon) {
  const U* p = t.data<U>();
  const std::int64_t n = t.numel();
  U any = 0;  // a branch-free OR-reduction (vectorized, on all cores when large): references are NaN-free almost always
#pragma omp parallel for simd reduction(| : any) schedule(static) if (n > (std::int64_t{1} << 22))
  for (std::int64_t i = 0; i < n; ++i) any |= static_cast<U>(static_cast<U>(p[i] & mag_mask) > nan_above ? p[i] ^ canon : 0);
  if (!any) return;
  if (!t.sole_owner()) t = t.clone();  // never write through storage a reference might share with an input
  U* q = t.data<U>();
  for (std::int64_t i = 0; i < n; ++i)
    if (static_cast<U>(q[i] & mag_mask) > nan_above) q[i] = canon;
}

void canonicalize_nans(Tensor& t) {
  if (!t.defined()) return;
  switch (t.dtype()) {
    case DType::f32: canonicalize<std::uint32_t>(t, 0x7FFFFFFFu, 0x7F800000u, 0x7FFFFFFFu); break;
    case DType::f64:
      canonicalize<std::uint64_t>(t, 0x7FFFFFFFFFFFFFFFull, 0x7FF0000000000000ull, 0x7FFFFFFFFFFFFFFFull);
      break;
    case DType::bf16: canonicalize<std::uint16_t>(t, 0x7FFF, 0x7F80, 0x7FFF); break;
    case DType::fp16: canonicalize<std::uint16_t>(t, 0x7FFF, 0x7C00, 0x7FFF); break;
    case DType::fp8_e4m3fn: canonicalize<std::uint8_t>(t, 0x7F, 0x7E, 0x7F); break;
    case DType::fp8_e5m2: canonicalize<std::uint8_t>(t, 0x7F, 0x7C, 0x7F); break;
    default: break;
  }
}

}  // namespace

Expected run_reference(const BoundCase& b, const RefOptions& opt, Backend backend) {
  const ImplFn* f = b.stage->impl_for(backend);
  if (!f)
    throw std::runtime_error(b.c->where() + ": stage " + b.stage->name + " has no " + std::string(backend_name(backend)) +
                             " implementation");
  Expected E = (*f)(*b.c, *b.params, opt);
  // NaN policy (docs/checking.md "NaN policy"): every NaN the reference writes into a float output carries the CUDA-canonical
  // code, whatever the host's arithmetic gave (x86's default NaN is negative) — one place for every stage and
  // backend. Byte tensors (caches) are data moves and keep their bytes.
  for (auto& t : E.tensors) {
    canonicalize_nans(t.value);
    canonicalize_nans(t.magnitude);  // bounds too: a NaN bound's bits are the arithmetic's, not the math's
    for (auto& [name, e] : t.emulations) canonicalize_nans(e);
  }
  return E;
}

Expected run_reference(const Case& c, const RefOptions& opt, Backend backend) {
  BoundCase b;
  if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
  return run_reference(b, opt, backend);
}

bool check_reference_memory(const Case& c, double bytes, const std::string& what, std::vector<Problem>& problems) {
  const double budget = static_cast<double>(io::default_memory_budget());
  if (bytes <= budget) return true;
  problems.push_back({c.file, c.name, what,
                      "a reference within the memory budget (" + std::to_string(static_cast<std::int64_t>(budget)) + " bytes, half the machine's memory)",
                      "about " + std::to_string(static_cast<std::int64_t>(bytes)) + " bytes"});
  return false;
}

bool check_reference_work(const Case& c, double fma, const std::string& what, std::vector<Problem>& problems) {
  double in_bytes = 0;
  for (const auto& [name, t] : c.inputs) in_bytes += static_cast<double>(t.nbytes());
  const double budget = std::max(0x1p34, 0x1p16 * in_bytes);
  if (fma <= budget) return true;
  problems.push_back({c.file, c.name, what,
                      "a reference within the compute budget (" + std::to_string(static_cast<std::int64_t>(budget)) +
                          " multiply-adds: max(2^34, 2^16 per input byte))",
                      "about " + std::to_string(static_cast<std::int64_t>(fma)) + " multiply-adds"});
  return false;
}

std::vector<cmp::CheckResult> repeated_rows_result(const std::string& stage, const std::string& tensor, const std::string& case_name,
                                                   const std::string& file, std::int64_t pairs, std::int64_t bad,
                                                   const std::string& fail_what, const std::string& first, const std::string& pass_what) {
  cmp::CheckResult res;
  res.file = file;
  res.stage = stage;
  res.group = "consistency";
  res.tensor = tensor;
  res.case_name = case_name;
  res.kind = CompareKind::bytes;
  res.numel = pairs;
  res.mismatches = bad;
  res.verdict = bad ? cmp::Verdict::FAIL : cmp::Verdict::BITEXACT;
  // Always said, also when nothing repeats: how many repeated rows the calls let us compare.
  res.message = bad ? std::to_string(bad) + " of " + std::to_string(pairs) + " " + fail_what + first
                    : pairs ? std::to_string(pairs) + " " + pass_what
                            : "0 repeated row(s) compared: no row repeats across these calls with identical inputs";
  return {res};
}

void check_slot_mapping(const Case& c, const Tensor& slots, std::int64_t capacity, const std::string& capacity_doc,
                        std::vector<Problem>& problems) {
  std::map<std::int64_t, std::int64_t> seen;
  for (std::int64_t t = 0; t < slots.numel(); ++t) {
    const std::int64_t v = slots.int_at(t);
    if (v == -1) continue;
    if (v < 0 || v >= capacity) {
      problems.push_back({c.file, c.name, "inputs/slot_mapping", "-1 or a slot in [0, " + capacity_doc + " = " + std::to_string(capacity) + ")",
                          "token " + std::to_string(t) + ": " + std::to_string(v)});
      return;
    }
    if (auto [it, fresh] = seen.emplace(v, t); !fresh) {
      problems.push_back({c.file, c.name, "inputs/slot_mapping", "distinct slots",
                          "tokens " + std::to_string(it->second) + " and " + std::to_string(t) + " both store into slot " + std::to_string(v)});
      return;
    }
  }
}

void apply_attr_defaults(Case& c) {
  const Stage* st = find_stage(c.stage);
  if (!st) return;
  apply_attr_defaults(c, st->schema);
  // The producer too, under the attr name the files have always carried (goldens keep their bytes).
  if (!st->default_profile.empty() && !c.attrs.count("kernel") && !c.attrs.count("variant"))
    c.attrs["variant"] = AttrValue{st->default_profile};
}

const Profile* kernel_profile(const Case& c) {
  const Stage* st = find_stage(c.stage);
  if (!st) return nullptr;
  std::vector<Problem> ignored;
  const Profile* p = resolve_profile(c, st->name, st->default_profile, ignored);
  return ignored.empty() ? p : nullptr;
}

const Profile* emulated_profile(const BoundCase& b) {
  return b.profile && b.profile->emulates(b.stage->name) ? b.profile : nullptr;
}

cmp::Tolerance resolve_tolerance(const BoundCase& b, const std::string& tensor, const ToleranceOverrides& o) {
  std::string pol = o.policy;
  if (pol.empty() && b.params) pol = b.params->tolerance_policy();
  if (pol.empty())
    if (const ProfileStage* k = b.profile ? b.profile->on(b.stage->name) : nullptr) pol = k->tolerance;
  if (pol.empty()) pol = b.stage->default_tolerance;
  const TolerancePolicy* p = find_tolerance_policy(pol);
  if (!p) throw std::invalid_argument("unknown tolerance profile '" + pol + "' (known: " + tolerance_policy_names() + ")");
  cmp::Tolerance t{p->name, p->rtol, p->atol};
  auto apply = [&](const std::vector<std::pair<std::string, double>>& ov, double& dst) {
    for (const auto& [n, v] : ov)  // bare values first, then the tensor's own (later wins)
      if (n.empty()) dst = v;
    for (const auto& [n, v] : ov)
      if (n == tensor) dst = v;
  };
  const double r0 = t.rtol, a0 = t.atol;
  apply(o.rtol, t.rtol);
  apply(o.atol, t.atol);
  if (t.rtol != r0 || t.atol != a0) t.profile += "+override";
  return t;
}

}  // namespace dsa
