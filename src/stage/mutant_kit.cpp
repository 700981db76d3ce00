#include "stage/mutant_kit.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"

namespace dsa::mutant {

Expected reference_for_check(const Case& c) {
  BoundCase b;
  if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
  RefOptions ro;
  ro.emulation = emulated_profile(b);
  return run_reference(b, ro);
}

cmp::Tolerance default_tolerance(const Case& c, const std::string& tensor) {
  BoundCase b;
  if (auto p = validate_case(c, false, &b); !p.empty()) throw SchemaError(p.front());
  return resolve_tolerance(b, tensor);
}

Tensor& output(Case& c, const std::string& n) {
  auto it = c.outputs.find(n);
  if (it == c.outputs.end()) throw std::runtime_error(c.where() + ": mutant needs outputs/" + n);
  it->second = it->second.clone();
  return it->second;
}
const RefTensor& reft(const Expected& E, const std::string& n) {
  const RefTensor* t = E.find(n);
  if (!t) throw std::runtime_error("mutant: reference has no tensor " + n);
  return *t;
}
void set_attr(Case& c, const std::string& k, AttrValue v) { c.attrs[k] = std::move(v); }

void scale_bf16(Tensor& t, double f) {
  auto* b = t.data<std::uint16_t>();
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = num::bf16_to_f64(b[i]);
    if (std::isfinite(v)) b[i] = num::f64_to_bf16(v * f);
  }
}

void iset(Tensor& t, std::int64_t i, std::int64_t v) {
  if (t.dtype() == DType::i64) t.data<std::int64_t>()[i] = v;
  else t.data<std::int32_t>()[i] = static_cast<std::int32_t>(v);
}

// Defined elements with a finite reference value of a bounded tensor.
std::vector<std::int64_t> finite_defined(const RefTensor& t) {
  std::vector<std::int64_t> v;
  const std::uint8_t* def = t.defined.defined() ? t.defined.data<std::uint8_t>() : nullptr;
  for (std::int64_t i = 0; i < t.value.numel(); ++i)
    if ((!def || def[i]) && std::isfinite(t.value.value(i))) v.push_back(i);
  return v;
}

void other_kernel_outputs(Case& c, const Expected& E, std::uint64_t seed) {
  Case tmp = c;
  tmp.attrs.erase("kernel");
  plausible_outputs(tmp, E, seed);
  c.outputs = tmp.outputs;
}

void plausible_outputs(Case& c, const Expected& E, std::uint64_t seed) {
  Rng rng(seed, 0x5E1F);
  const Profile* kp = kernel_profile(c);
  const std::string emu = kp && kp->emulates(c.stage) ? kp->name : "";
  std::uint64_t stream = 0;
  for (const RefTensor& rt : E.tensors) {
    Rng r = rng.fork(stream++);
    if (rt.kind == CompareKind::bytes) {
      c.outputs[rt.name] = rt.value.clone();
      continue;
    }
    const cmp::Tolerance tol = default_tolerance(c, rt.name);
    if (rt.kind == CompareKind::bounded) {
      if (auto it = emu.empty() ? rt.emulations.end() : rt.emulations.find(emu); it != rt.emulations.end()) {
        c.outputs[rt.name] = it->second.clone();
        continue;
      }
      Tensor o = rt.value.clone();
      const std::uint8_t* def = rt.defined.defined() ? rt.defined.data<std::uint8_t>() : nullptr;
      const double* mag = rt.magnitude.defined() ? rt.magnitude.data<double>() : nullptr;
      for (std::int64_t i = 0; i < o.numel(); ++i) {
        const double u = r.uniform(-1.0, 1.0);
        if (def && !def[i]) {
          o.set_value(i, 1000.0 * u);  // a kernel may leave anything in undefined elements
          continue;
        }
        const double v = rt.value.value(i);
        if (!std::isfinite(v)) continue;
        const double M = mag ? mag[i] : std::fabs(v);
        o.set_value(i, v + 0.3 * u * (tol.rtol * M + tol.atol));  // one rounding to the output dtype
      }
      c.outputs[rt.name] = o;
      continue;
    }
    // topk_set
    const TopkRef& t = rt.topk;
    Tensor o = rt.value.clone();
    const auto R = static_cast<std::int64_t>(t.len.size());
    const std::int64_t W = R ? o.numel() / R : 0;
    for (std::int64_t row = 0; row < R; ++row) {
      const cmp::TopkRow tr = cmp::topk_row(t, row, tol);
      if (t.fast_path && tr.len <= t.k) continue;
      std::vector<std::int64_t> sel;
      for (std::int64_t i = 0; i < tr.n; ++i) sel.push_back(t.from_index(row, rt.value.int_at(row * W + i)));
      const std::set<std::int64_t> in(sel.begin(), sel.end());
      std::vector<std::int64_t> band_out;
      for (std::int64_t p = 0; p < tr.len; ++p)
        if (tr.cls[static_cast<std::size_t>(p)] == cmp::Band::band && !in.count(p)) band_out.push_back(p);
      for (int s = 0; s < 2 && !band_out.empty(); ++s) {  // up to two in-band swaps
        std::vector<std::size_t> band_in;
        for (std::size_t i = 0; i < sel.size(); ++i)
          if (tr.cls[static_cast<std::size_t>(sel[i])] == cmp::Band::band) band_in.push_back(i);
        if (band_in.empty()) break;
        const auto a = band_in[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(band_in.size()) - 1))];
        const auto b = static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(band_out.size()) - 1));
        std::swap(sel[a], band_out[b]);
      }
      if (t.sorted) {
        std::stable_sort(sel.begin(), sel.end(), [&](std::int64_t a, std::int64_t b) {
          return tr.score[static_cast<std::size_t>(a)] > tr.score[static_cast<std::size_t>(b)];
        });
      } else if (t.ascending) {
        std::sort(sel.begin(), sel.end(), [&](std::int64_t a, std::int64_t b) { return t.to_index(row, a) < t.to_index(row, b); });
      } else {
        for (std::size_t i = sel.size(); i > 1; --i)
          std::swap(sel[i - 1], sel[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(i) - 1))]);
      }
      for (std::int64_t i = 0; i < W; ++i) iset(o, row * W + i, i < tr.n ? t.to_index(row, sel[static_cast<std::size_t>(i)]) : -1);
    }
    c.outputs[rt.name] = o;
  }
}

TensorMap buggy_outputs(const Case& c, const std::function<void(Case&)>& bug, std::uint64_t seed) {
  Case b = c;
  bug(b);
  const Expected E = reference_for_check(b);
  plausible_outputs(b, E, seed);
  return b.outputs;
}

std::function<void(Case&, const Expected&, std::uint64_t)> buggy(std::function<void(Case&)> bug) {
  return [bug](Case& c, const Expected&, std::uint64_t seed) {
    for (auto& [n, t] : buggy_outputs(c, bug, seed)) c.outputs[n] = t;
  };
}

void write_padded_tokens(Tensor& t) {
  auto taken = [&t](std::int64_t s) {
    for (std::int64_t i = 0; i < t.numel(); ++i)
      if (t.int_at(i) == s) return true;
    return false;
  };
  std::int64_t free = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (t.int_at(i) >= 0) continue;
    while (taken(free)) ++free;
    iset(t, i, free);
  }
}

void replace_padding(Tensor& t, std::int64_t v) {
  for (std::int64_t i = 0; i < t.numel(); ++i)
    if (t.int_at(i) == -1) iset(t, i, v);
}

void rows_ascending(Tensor& t) {
  const std::int64_t W = t.dim(-1);
  for (std::int64_t r = 0; r < t.numel() / W; ++r) {
    std::vector<std::int64_t> v;
    for (std::int64_t i = 0; i < W && t.int_at(r * W + i) >= 0; ++i) v.push_back(t.int_at(r * W + i));
    std::sort(v.begin(), v.end());
    for (std::size_t i = 0; i < v.size(); ++i) iset(t, r * W + static_cast<std::int64_t>(i), v[i]);
  }
}

}  // namespace dsa::mutant
