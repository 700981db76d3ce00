#include "pipeline/check_case.hpp"
#include "pipeline/timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "compare/detail.hpp"

namespace dsa::pipeline {

using cmp::CheckResult;
using cmp::Tolerance;
using cmp::Verdict;
namespace detail = cmp::detail;

std::pair<std::string, double> parse_tol_override(const std::string& s) {
  const auto colon = s.rfind(':');
  const std::string name = colon == std::string::npos ? "" : s.substr(0, colon);
  const std::string val = colon == std::string::npos ? s : s.substr(colon + 1);
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(val, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != val.size() || val.empty() || !(v >= 0) || !std::isfinite(v))
    throw std::invalid_argument("tolerance '" + s + "': expected NAME:VALUE or VALUE with a finite value >= 0");
  return {name, v};
}

const Profile* requested_emulation(const BoundCase& b, const CheckOptions& o) {
  if (o.no_emulation) return nullptr;
  return emulated_profile(b);
}

namespace {

// Hypothesis hints over one output fed whole or in row tiles: per tile, up to the remaining of `max` (64) failing elements
// (evenly spread over the tile's failing elements; deterministic) are evaluated with every hypothesis of the tensor.
class HypothesisSampler {
 public:
  HypothesisSampler(const BoundCase& b, const std::string& tensor, const Tolerance& tol, std::int64_t max = 64)
      : b_(b), tol_(tol), max_(std::max<std::int64_t>(1, max)) {
    if (b.params && b.c)
      for (const auto& h : b.stage->hypotheses)
        if (h.tensor == tensor && h.value) hs_.push_back({&h, 0, 0, false});
  }
  void add(const Tensor& out, const RefTensor& ref) {
    if (hs_.empty()) return;
    const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
    const bool has_m = ref.magnitude.defined() && ref.magnitude.numel() == ref.value.numel();
    const double* mag = has_m ? ref.magnitude.data<double>() : nullptr;
    int p = 24, emin = -126;
    detail::ulp_format(out.dtype(), p, emin);
    // Non-finite values are the same value when both are NaN or both the same infinity.
    auto same_nonfinite = [](double a, double b) { return (std::isnan(a) && std::isnan(b)) || (std::isinf(a) && a == b); };
    auto failing = [&](std::int64_t i) {
      if (def && !def[i]) return false;
      const double o = out.value(i), e = ref.value.value(i);
      if (!std::isfinite(o) || !std::isfinite(e)) return !same_nonfinite(o, e);  // a NONFINITE verdict's elements
      return std::fabs(o - e) > tol_.rtol * (mag ? mag[i] : std::fabs(e)) + tol_.atol;
    };
    std::int64_t n_fail = -1;
    for (auto& H : hs_) {
      if (H.stopped || H.tried >= max_) continue;
      if (n_fail < 0) {
        n_fail = 0;
        for (std::int64_t i = 0; i < out.numel(); ++i) n_fail += failing(i);
      }
      if (n_fail == 0) return;
      const std::int64_t stride = std::max<std::int64_t>(1, n_fail / max_);
      std::int64_t seen = 0;
      for (std::int64_t i = 0; i < out.numel() && H.tried < max_; ++i) {
        if (!failing(i) || seen++ % stride != 0) continue;
        std::optional<Hypothesis::Value> alt;
        try {  // a hint must never turn a verdict into an error (e.g. a case bound without its inputs)
          alt = H.h->value(*b_.c, *b_.params, ref.flat_offset + i);
        } catch (const std::exception&) {
          H.stopped = true;
          break;
        }
        if (!alt) continue;
        ++H.considered;
        // An element the bug leaves within the reference's own bound says nothing either way (a tiny perturbation
        // in the right direction would otherwise "match" an element just outside the bound): not sampled.
        const double e = ref.value.value(i), a = alt->value, o = out.value(i);
        if (std::isfinite(a) && std::isfinite(e) && std::fabs(a - e) <= tol_.rtol * (mag ? mag[i] : std::fabs(e)) + tol_.atol) continue;
        if (!std::isfinite(a) && same_nonfinite(a, e)) continue;
        ++H.tried;
        // The buggy kernel errs like a correct one around its own value, then rounds to the output dtype; a
        // non-finite value must be the same non-finite value.
        if (!std::isfinite(a) || !std::isfinite(o)) {
          H.matched += same_nonfinite(a, o) ? 1 : 0;
          continue;
        }
        const double slack = tol_.rtol * std::fabs(alt->magnitude) + tol_.atol + detail::ulp_at(a, p, emin);
        if (std::fabs(o - a) <= slack) ++H.matched, ++H.matched_finite;
      }
    }
  }
  std::vector<std::string> findings() const {
    std::vector<std::string> f;
    for (const auto& H : hs_)
      // The bug must move at least half of the sampled failing elements out of the bound (a bug that leaves most of
      // them in place does not explain the failure, however well it fits the few it moves) and fit 90 % of those.
      // A NaN matching a NaN tells bugs apart poorly (every misread of NaN-filled bytes gives NaN): at least one
      // finite element must match too.
      if (H.tried > 0 && H.tried * 2 >= H.considered && H.matched * 10 >= H.tried * 9 && H.matched_finite > 0)
        f.push_back(H.h->bug + kHypothesisMatch + " (" + H.h->doc + ") at " + std::to_string(H.matched) + " of " +
                    std::to_string(H.tried) + " sampled failing element(s)");
    return f;
  }

 private:
  struct One {
    const Hypothesis* h;
    std::int64_t tried, matched;
    bool stopped;
    std::int64_t considered = 0;  // sampled failing elements the bug defines a value for
    std::int64_t matched_finite = 0;  // matches of a finite value
  };
  const BoundCase& b_;
  Tolerance tol_;
  std::int64_t max_;
  std::vector<One> hs_;
};

// A -inf mask that differs from the reference's by one column at an end in every row where they differ (a causal
// or [ks, ke) window off by one). The output is viewed as [rows, last dim] and fed whole or in row tiles (tiles hold
// whole rows); only tiles where the mask differs are scanned. hint() is "" unless that is the pattern.
class MaskShift {
 public:
  void add(const Tensor& out, const RefTensor& ref) {
    const Tensor& e = ref.value;
    if (broken_ || e.shape().empty() || out.numel() != e.numel()) return;
    const std::int64_t cols = e.shape().back();
    if (cols <= 0) return;
    const std::int64_t rows = e.numel() / cols, row0 = ref.flat_offset / cols;
    for (std::int64_t r = 0; r < rows && !broken_; ++r) {
      std::int64_t a0, b0, a1, b1;
      if (!interval(e, r, cols, a0, b0) || !interval(out, r, cols, a1, b1)) broken_ = true;
      if (broken_ || (a0 == a1 && b0 == b1)) continue;
      if (a0 < 0 || a1 < 0 || std::llabs(a1 - a0) > 1 || std::llabs(b1 - b0) > 1) {
        broken_ = true;
        continue;
      }
      if (differing_++ == 0) first_row_ = row0 + r;
      merge(lo_, a1 - a0);
      merge(hi_, b1 - b0);
    }
  }
  std::string hint() const {
    if (broken_ || !differing_ || lo_ == 99 || hi_ == 99) return "";
    std::string what;
    if (hi_) what = std::string("the window's end (ke / the causal limit) ") + (hi_ > 0 ? "one column late" : "one column early");
    if (lo_) what += (what.empty() ? "" : " and ") + std::string("the window's start (ks) ") + (lo_ > 0 ? "one column late" : "one column early");
    return "mask off by one: " + what + " in each of the " + std::to_string(differing_) + " row(s) whose mask differs (first: row " +
           std::to_string(first_row_) + ")";
  }

 private:
  // The finite (not -inf) columns of row r as one interval [a, b); false when they are not one interval.
  static bool interval(const Tensor& t, std::int64_t r, std::int64_t cols, std::int64_t& a, std::int64_t& b) {
    a = -1, b = -1;
    for (std::int64_t j = 0; j < cols; ++j)
      if (t.value(r * cols + j) != -std::numeric_limits<double>::infinity()) {
        if (a < 0) a = j;
        if (b >= 0 && b != j) return false;
        b = j + 1;
      }
    return true;
  }
  static void merge(int& s, std::int64_t d) {
    if (d == 0) return;
    if (s == 0) s = static_cast<int>(d);
    else if (s != d) s = 99;
  }
  bool broken_ = false;
  int lo_ = 0, hi_ = 0;  // the one shift seen at each end (0 = none yet; 99 = inconsistent)
  std::int64_t differing_ = 0, first_row_ = -1;
};

// The bounded judgement of one output, fed whole or in row tiles: the bound, and the bit-exact emulation the case's
// kernel asks for (policy in check_case.hpp).
class BoundedJudge {
 public:
  BoundedJudge(const BoundCase& b, const std::string& group, const RefTensor& ref, DType out_dtype, const CheckOptions& o,
               const Shape& whole)
      : group_(group), tol_(resolve_tolerance(b, ref.name, o.tol)), main_(tol_, ref, out_dtype), hyp_(b, ref.name, tol_, o.hint_samples) {
    main_.set_threads(o.threads);
    if (o.plots) {  // the whole output viewed as [rows, last dim]
      std::int64_t n = 1;
      for (auto d : whole) n *= d;
      const std::int64_t cols = whole.empty() ? 1 : std::max<std::int64_t>(whole.back(), 1);
      main_.collect_plot(n / cols, cols);
    }
    const Profile* prof = requested_emulation(b, o);
    emu_ = prof ? prof->name : "";
    if (const ProfileStage* ps = prof ? prof->on(b.stage->name) : nullptr) emu_required_ = ps->emulation_required;
    if (!emu_.empty()) {
      has_emu_ = ref.emulations.count(emu_) > 0;
      if (auto it = ref.emulation_notes.find(emu_); it != ref.emulation_notes.end()) emu_why_ = it->second;
      if (has_emu_) emu_acc_.emplace(Tolerance{emu_, 0.0, 0.0}, ref, out_dtype), emu_acc_->set_threads(o.threads);
    }
  }
  void add(const Tensor& out, const RefTensor& ref) {
    const std::int64_t fails_before = main_.bound_failures(), masks_before = main_.mask_mismatches(),
                       nf_before = main_.nonfinite_mismatches();
    main_.add(out, ref);
    if (main_.mask_mismatches() > masks_before) mask_.add(out, ref);  // only tiles whose mask differs
    if (emu_acc_) {
      const Tensor& em = ref.emulations.at(emu_);
      emu_acc_->add(out, ref, &em);
      const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
      for (std::int64_t i = 0; i < out.numel(); ++i) {
        if (def && !def[i]) continue;
        const double x = out.value(i), y = em.value(i);
        if (out.bits(i) != em.bits(i) && !(std::isnan(x) && std::isnan(y))) ++diff_;
      }
    }
    // Hints only ever explain bound failures and NaN / inf pattern differences (a misread cache decodes NaN codes).
    if (main_.bound_failures() > fails_before || main_.nonfinite_mismatches() > nf_before) hyp_.add(out, ref);
  }
  CheckResult finish() const {
    CheckResult r = main_.finish();
    if (r.verdict == Verdict::MASK_MISMATCH)
      if (const std::string h = mask_.hint(); !h.empty()) {
        r.message += "; hint: " + h;
        r.notes.push_back(h);
      }
    if (!emu_.empty() && !has_emu_) {
      r.notes.push_back("emulation " + emu_ + " requested by attr kernel but not provided by the reference" +
                        (emu_why_.empty() ? std::string() : " (" + emu_why_ + ")") + "; judged by bound");
    } else if (emu_acc_) {
      const CheckResult e = emu_acc_->finish();
      r.emulation = emu_;
      r.emulation_mismatches = diff_;
      if (diff_ == 0) {
        r.verdict = Verdict::BITEXACT;
        r.message = "bit-exact vs " + emu_ + " emulation; vs exact value: " +
                    (r.bounded ? "max err/M " + detail::fmt(r.bounded->max_err_over_m) : r.message);
      } else if (r.pass() && !emu_required_) {
        // The emulation is one admissible order of the producer's arithmetic (profile: emulation not required).
        r.notes.push_back("not bit-exact vs " + emu_ + " emulation (" + std::to_string(diff_) +
                          " elements): the producer's summation order is not fixed; judged by the bound");
      } else if (r.pass() && group_ == "expected") {
        // A golden may hold the exact value: the emulation policy is for kernel outputs only.
        r.notes.push_back("expected/ is not the " + emu_ + " emulation (" + std::to_string(diff_) + " elements); judged by the bound");
      } else if (r.pass()) {
        r.verdict = Verdict::FAIL;
        r.first = e.first;
        r.worst = e.worst;
        r.mismatches = diff_;
        r.message = "not bit-exact vs " + emu_ + " emulation (" + std::to_string(diff_) + " elements; first at " +
                    (e.first ? detail::loc_str(*e.first) : std::string("?")) + "); within " + tol_.profile +
                    " bound (" + r.message + "); use --no-emulation to judge by the bound only";
      } else {
        r.message += "; also not bit-exact vs " + emu_ + " emulation (" + std::to_string(diff_) + " elements)";
      }
    }
    return r;
  }
  // Hints for a FAIL judged by the bound.
  std::vector<std::string> hints() const { return hyp_.findings(); }

 private:
  std::string group_;
  Tolerance tol_;
  cmp::BoundedAccumulator main_;
  std::optional<cmp::BoundedAccumulator> emu_acc_;
  HypothesisSampler hyp_;
  MaskShift mask_;
  std::string emu_, emu_why_;
  bool has_emu_ = false;
  bool emu_required_ = true;  // ProfileStage::emulation_required of the emulated profile on this stage
  std::int64_t diff_ = 0;
};

// The non-finite input elements of a case (float tensors of inputs/, in name order): "kv_scale[10] = inf" for the
// first one, with the total; "" when every input is finite. A NONFINITE verdict names them: the kernel's NaN may
// come from an input the reference treats differently.
std::string nonfinite_inputs(const Case& c) {
  std::string first;
  std::int64_t total = 0, tensors = 0;
  for (const auto& [name, t] : c.inputs) {
    if (!dtype_is_float(t.dtype()) || !t.defined()) continue;
    std::int64_t here = 0;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.value(i);
      if (std::isfinite(v)) continue;
      if (first.empty()) {
        std::string idx;
        std::int64_t rest = i;
        for (std::size_t d = t.shape().size(); d-- > 0;) {
          const std::int64_t n = t.shape()[d];
          idx = std::to_string(n ? rest % n : 0) + (idx.empty() ? "" : ",") + idx;
          rest = n ? rest / n : 0;
        }
        first = name + "[" + idx + "] = " + detail::exact(v);
      }
      ++here;
    }
    total += here;
    tensors += here > 0;
  }
  if (first.empty()) return "";
  return "non-finite input " + first + (total > 1 ? " (" + std::to_string(total) + " non-finite input element(s) in " +
                                                        std::to_string(tensors) + " tensor(s))" : std::string());
}

// Fills in the result's identity and adds the hints and sanity findings.
void finish_result(CheckResult& r, const BoundCase& b, const std::string& group, const RefTensor& ref,
                   const std::vector<std::string>& hints, const std::vector<std::string>& sanity) {
  const Case& c = *b.c;
  r.kind = ref.kind;
  r.tensor = ref.name;
  r.group = group;
  r.file = c.file;
  r.case_name = c.name;
  r.stage = c.stage;
  if (r.verdict == Verdict::NONFINITE && b.c) {
    const std::string nf = nonfinite_inputs(c);
    if (!nf.empty()) {
      r.message += "; " + nf;
      r.notes.push_back(nf);
    }
  }
  if (r.verdict == Verdict::FAIL && (ref.kind == CompareKind::bounded || ref.kind == CompareKind::bytes))
    for (const auto& f : hints) {
      r.message += "; hint: " + f;
      r.notes.push_back(f);
    }
  if (r.verdict != Verdict::ERROR && r.verdict != Verdict::SHAPE && r.verdict != Verdict::DTYPE) {
    for (const auto& f : sanity) {
      // A finding that starts with "note: " is a fact about the case's inputs, not an explanation of a failure: it is
      // listed as a note and never added to the message as a hint.
      if (f.rfind(kNotePrefix, 0) == 0) {
        r.notes.push_back(f.substr(std::char_traits<char>::length(kNotePrefix)));
        continue;
      }
      if (!r.pass()) r.message += "; hint: " + f;
      r.notes.push_back(f);
    }
  }
}

// The byte hypotheses of a failing bytes output: the bugs whose whole buggy output explains >= 90 % of the differing
// bytes (out equals the buggy output there) and differs from the reference somewhere.
std::vector<std::string> byte_hypothesis_findings(const BoundCase& b, const Tensor& out, const RefTensor& ref) {
  std::vector<std::string> f;
  if (!b.params || !b.c || ref.flat_offset != 0) return f;
  const std::uint8_t* o = reinterpret_cast<const std::uint8_t*>(out.raw());
  const std::uint8_t* e = reinterpret_cast<const std::uint8_t*>(ref.value.raw());
  const std::size_t n = out.nbytes();
  for (const auto& h : b.stage->hypotheses) {
    if (h.tensor != ref.name || !h.bytes) continue;
    std::optional<Tensor> alt;
    try {  // a hint must never turn a verdict into an error
      alt = h.bytes(*b.c, *b.params);
    } catch (const std::exception&) {
      continue;
    }
    if (!alt || alt->nbytes() != n) continue;
    const std::uint8_t* a = reinterpret_cast<const std::uint8_t*>(alt->raw());
    std::size_t differ = 0, explained = 0, alt_differs = 0;
    for (std::size_t i = 0; i < n; ++i) {
      alt_differs += a[i] != e[i];
      if (o[i] == e[i]) continue;
      ++differ;
      explained += a[i] == o[i];
    }
    if (differ > 0 && alt_differs > 0 && explained * 10 >= differ * 9)
      f.push_back(h.bug + kHypothesisMatch + " (" + h.doc + ") at " + std::to_string(explained) + " of " + std::to_string(differ) +
                  " differing byte(s)");
  }
  return f;
}

}  // namespace

std::vector<std::string> hypothesis_findings(const BoundCase& b, const Tensor& out, const RefTensor& ref, const Tolerance& tol) {
  HypothesisSampler h(b, ref.name, tol);
  h.add(out, ref);
  return h.findings();
}

CheckResult compare_tensor(const BoundCase& b, const std::string& group, const Tensor& out, const RefTensor& ref,
                           const CheckOptions& o) {
  CheckResult r;
  std::vector<std::string> hints;
  try {
    const bool index_ok = ref.kind == CompareKind::topk_set && dtype_is_integer(out.dtype()) &&
                          dtype_is_integer(ref.value.dtype());  // i32 or i64 indices are both fine
    if (out.dtype() != ref.value.dtype() && !index_ok) {
      r.verdict = Verdict::DTYPE;
      r.message = "dtype " + std::string(dtype_name(out.dtype())) + ", reference has " + std::string(dtype_name(ref.value.dtype()));
    } else if (out.shape() != ref.value.shape()) {
      r.verdict = Verdict::SHAPE;
      r.message = "shape " + shape_str(out.shape()) + ", reference has " + shape_str(ref.value.shape());
    } else if (ref.kind == CompareKind::bytes) {
      r = cmp::compare_bytes(out, ref, o.nan);
      if (r.verdict == Verdict::FAIL) hints = byte_hypothesis_findings(b, out, ref);
    } else if (ref.kind == CompareKind::topk_set) {
      r = cmp::compare_topk(out, ref, resolve_tolerance(b, ref.name, o.tol), o.plots);
    } else {
      BoundedJudge j(b, group, ref, out.dtype(), o, out.shape());
      j.add(out, ref);
      r = j.finish();
      if (r.verdict == Verdict::FAIL || r.verdict == Verdict::NONFINITE) hints = j.hints();

    }
  } catch (const std::exception& e) {
    r.verdict = Verdict::ERROR;
    r.message = e.what();
  }
  std::vector<std::string> sanity;
  if (r.verdict != Verdict::ERROR && r.verdict != Verdict::SHAPE && r.verdict != Verdict::DTYPE) sanity = sanity_findings(b, ref.name, out, &ref);
  finish_result(r, b, group, ref, hints, sanity);
  return r;
}

RefOptions reference_options(const BoundCase& b, const CheckOptions& o) {
  RefOptions ro;
  ro.threads = o.threads;
  ro.emulation = requested_emulation(b, o);
  return ro;
}

CheckResult case_error(const Case& c, const std::string& tensor, const std::string& msg) {
  CheckResult r;
  r.file = c.file;
  r.case_name = c.name;
  r.stage = c.stage;
  r.group = "case";
  r.tensor = tensor;
  r.verdict = Verdict::ERROR;
  r.message = msg;
  return r;
}

namespace {

std::vector<CheckResult> nothing_to_check(const Case& c) {
  return {case_error(c, "-", c.where() + ": nothing to check: the case has no outputs/ (kernel results) and no expected/ group")};
}

// Checks before any reference runs: the case is valid and bound, and has something to check.
std::vector<CheckResult> precheck(const Case& c, BoundCase& b) {
  if (!find_stage(c.stage)) return {case_error(c, "-", c.where() + ": unknown stage '" + c.stage + "'")};
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  if (auto p = validate_case(c, true, &b); !p.empty()) {
    std::vector<CheckResult> res;
    for (const auto& q : p) res.push_back(case_error(c, "-", q.str()));
    return res;
  }
  return {};
}

}  // namespace

std::vector<CheckResult> check_case(const Case& c, const CheckOptions& o) {
  BoundCase b;
  if (auto res = precheck(c, b); !res.empty()) return res;
  return check_case(b, o);
}

namespace {

// The groups (outputs, expected) whose tensor `t` the reader deferred.
bool has_deferred(const Case& c, const std::string& t) {
  for (const auto* g : {&c.outputs, &c.expected})
    if (auto it = g->find(t); it != g->end() && it->second.is_deferred()) return true;
  return false;
}

// A stage with a RowTiling whose output was deferred: reference rows, output rows read from the file, compared and
// dropped tile by tile (peak memory O(inputs + tile)); the same results as the whole-tensor check.
std::vector<CheckResult> check_case_tiled(const BoundCase& b, const CheckOptions& o) {
  const Case& c = *b.c;
  const Stage* st = b.stage;
  const std::string& T = st->tiling->tensor;
  struct Group {
    std::string name;
    const Tensor* t;
    std::optional<BoundedJudge> judge;
    std::optional<CheckResult> early;  // a structural or read failure: the group's result
    std::size_t const_rows = 0;
    std::int64_t first_const = -1;
  };
  std::vector<Group> groups;
  for (const auto& [gname, g] : {std::pair<std::string, const TensorMap*>{"outputs", &c.outputs}, {"expected", &c.expected}})
    if (auto it = g->find(T); it != g->end()) groups.push_back({gname, &it->second, std::nullopt, std::nullopt});
  std::vector<CheckResult> res;
  // Other outputs of the case (a tiled stage has one output; anything else is reported as having no reference).
  for (const auto& [gname, g] : {std::pair<std::string, const TensorMap*>{"outputs", &c.outputs}, {"expected", &c.expected}})
    for (const auto& [n, t] : *g)
      if (n != T)
        res.push_back(case_error(c, gname + "/" + n, c.where() + ": " + gname + "/" + n + ": the reference of stage " + c.stage + " has no such output"));
  const std::int64_t R = groups.front().t->dim(0);
  const std::int64_t per_row = R > 0 ? groups.front().t->numel() / R : 0;
  const std::int64_t align = std::max<std::int64_t>(1, st->tiling->align(c, *b.params));
  std::int64_t tile = o.tile_rows > 0 ? o.tile_rows : std::max<std::int64_t>(1, (std::int64_t{16} << 20) / std::max<std::int64_t>(per_row, 1));
  tile = std::max(align, tile / align * align);
  bool shown_meta = false;
  RefTensor meta;  // name and kind of the tiled output
  std::int64_t tiles = 0;
  for (std::int64_t r0 = 0; r0 < R || (R == 0 && tiles == 0); ++tiles) {
    const std::int64_t r1 = std::min(R, r0 + tile);
    RefOptions ro = reference_options(b, o);
    ro.row_begin = r0;
    ro.row_end = r1;
    Expected E;
    try {
      E = run_reference(b, ro, reference_backend(b, o));
    } catch (const std::exception& e) {
      return {case_error(c, "-", c.where() + ": reference of stage " + c.stage + " failed: " + e.what())};
    }
    const RefTensor* ref = E.find(T);
    if (!ref) return {case_error(c, "-", c.where() + ": the reference of stage " + c.stage + " has no output " + T)};
    if (!shown_meta) meta.name = ref->name, meta.kind = ref->kind, shown_meta = true;
    for (auto& g : groups) {
      if (g.early) continue;
      CheckResult r;
      try {
        const Tensor out = g.t->rows(r0, r1);
        if (out.dtype() != ref->value.dtype()) {
          r.verdict = Verdict::DTYPE;
          r.message = "dtype " + std::string(dtype_name(out.dtype())) + ", reference has " + std::string(dtype_name(ref->value.dtype()));
        } else if (out.shape() != ref->value.shape()) {
          Shape full = ref->value.shape();
          full[0] = R;
          r.verdict = Verdict::SHAPE;
          r.message = "shape " + shape_str(g.t->shape()) + ", reference has " + shape_str(full);
        } else {
          if (!g.judge) g.judge.emplace(b, g.name, *ref, out.dtype(), o, g.t->shape());
          g.judge->add(out, *ref);
          for (const auto& os : st->schema.outputs)
            if (os.tensor.name == T && os.nonconstant_rows) {
              const auto rows = cmp::constant_rows_unlike_ref(out, ref);
              if (!rows.empty() && g.first_const < 0) g.first_const = rows.front();
              g.const_rows += rows.size();
            }
          continue;
        }
      } catch (const std::exception& e) {
        r.verdict = Verdict::ERROR;
        r.message = e.what();
      }
      g.early = r;
    }
    if (o.row_progress) o.row_progress(c, r1, R);
    r0 = r1;
    if (R == 0) break;
  }
  for (auto& g : groups) {
    CheckResult r = g.early ? *g.early : g.judge->finish();
    std::vector<std::string> hints, sanity;
    if (!g.early && (r.verdict == Verdict::FAIL || r.verdict == Verdict::NONFINITE)) hints = g.judge->hints();
    if (g.const_rows) sanity.push_back(cmp::constant_rows_finding(g.const_rows, g.first_const));
    finish_result(r, b, g.name, meta, hints, sanity);
    r.notes.push_back("streamed from the file in " + std::to_string(tiles) + " tile(s) of " + std::to_string(tile) + " row(s)");
    if (auto fb = backend_fallback_note(b, o); !fb.empty()) r.notes.push_back(fb);
    res.insert(res.begin() + static_cast<std::ptrdiff_t>(&g - groups.data()), std::move(r));
  }
  return res;
}

}  // namespace

std::vector<CheckResult> check_case(const BoundCase& b, const CheckOptions& o) {
  const Case& c = *b.c;
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  if (b.stage->tiling && has_deferred(c, b.stage->tiling->tensor)) return check_case_tiled(b, o);
  Expected E;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    E = run_reference(b, reference_options(b, o), reference_backend(b, o));
    timing_line("case '" + c.name + "': reference on the " + std::string(backend_name(reference_backend(b, o))), t0);
  } catch (const std::exception& e) {
    std::vector<CheckResult> res{case_error(c, "-", c.where() + ": reference of stage " + c.stage + " failed: " + e.what())};
    for (const auto& [n, t] : c.outputs)  // what can be said without a reference
      for (auto& f : sanity_findings(b, n, t, nullptr)) res.back().notes.push_back("outputs/" + n + ": " + f);
    return res;
  }
  const auto t1 = std::chrono::steady_clock::now();
  auto res = check_case(b, o, E);
  timing_line("case '" + c.name + "': comparison", t1);
  return res;
}

Backend reference_backend(const BoundCase& b, const CheckOptions& o) {
  return b.stage && b.stage->impl_for(o.backend) ? o.backend : Backend::cpu;
}

std::string backend_fallback_note(const BoundCase& b, const CheckOptions& o) {
  if (reference_backend(b, o) == o.backend) return "";
  return "reference on the cpu: stage " + b.stage->name + " has no " + std::string(backend_name(o.backend)) +
         " implementation (every backend gives the same bytes)";
}

std::vector<CheckResult> check_case(const BoundCase& b, const CheckOptions& o, const Expected& E) {
  const Case& c = *b.c;
  const Stage* st = b.stage;
  if (c.outputs.empty() && c.expected.empty()) return nothing_to_check(c);
  std::vector<CheckResult> res;
  const std::string fallback = backend_fallback_note(b, o);
  // Stage output order first, then anything else (alphabetical).
  std::vector<std::string> order;
  for (const auto& os : st->schema.outputs) order.push_back(os.tensor.name);
  for (const auto* g : {&c.outputs, &c.expected})
    for (const auto& [n, t] : *g)
      if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  for (const auto& [gname, g] : {std::pair<std::string, const TensorMap*>{"outputs", &c.outputs}, {"expected", &c.expected}}) {
    for (const auto& n : order) {
      auto it = g->find(n);
      if (it == g->end()) continue;
      const RefTensor* ref = E.find(n);
      if (!ref) {
        res.push_back(case_error(c, gname + "/" + n, c.where() + ": " + gname + "/" + n + ": the reference of stage " + c.stage + " has no such output"));
        continue;
      }
      res.push_back(compare_tensor(b, gname, it->second, *ref, o));
      if (!fallback.empty()) res.back().notes.push_back(fallback);
    }
  }
  return res;
}

std::vector<std::string> sanity_findings(const BoundCase& b, const std::string& tensor, const Tensor& out, const RefTensor* ref) {
  std::vector<std::string> f;
  for (const auto& os : b.stage->schema.outputs) {
    if (os.tensor.name != tensor) continue;
    if (os.positive)
      if (auto x = cmp::finding_not_positive(out, ref)) f.push_back(*x);
    if (os.nonconstant_rows)
      if (auto x = cmp::finding_constant_rows(out, ref)) f.push_back(*x);
  }
  if (b.stage->sanity) b.stage->sanity(*b.c, tensor, out, f);
  if (ref)
    if (auto x = cmp::finding_positional_topk(out, *ref)) f.push_back(*x);
  return f;
}

}  // namespace dsa::pipeline
