// Reference-free sanity checks (validation_anchors B5, B6, B22): finite positive values, no constant rows, top-k
// not equal to the positional order when len > k. With a reference, findings it exhibits too are dropped. Which
// check applies to which tensor is declared by the stage's schema (OutputSpec), never decided here.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {
namespace {

// First non-finite or non-positive element of a float scale tensor (-1 if none), with the count.
std::int64_t bad_scales(const Tensor& t, std::int64_t& count) {
  count = 0;
  std::int64_t first = -1;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.value(i);
    if (!(std::isfinite(v) && v > 0)) {
      if (first < 0) first = i;
      ++count;
    }
  }
  return first;
}

// Rows (dim 0) whose defined finite elements (>= 2) are all equal.
std::vector<std::int64_t> constant_rows(const Tensor& t, const std::uint8_t* def) {
  std::vector<std::int64_t> rows;
  if (t.rank() < 2 || t.dim(0) == 0) return rows;
  const std::int64_t R = t.dim(0), W = t.numel() / R;
  for (std::int64_t r = 0; r < R; ++r) {
    std::int64_t n = 0;
    double v0 = 0;
    bool constant = true;
    for (std::int64_t j = 0; j < W && constant; ++j) {
      const std::int64_t i = r * W + j;
      if (def && !def[i]) continue;
      const double v = t.value(i);
      if (!std::isfinite(v)) continue;
      if (n++ == 0) v0 = v;
      else constant = v == v0;
    }
    if (constant && n >= 2) rows.push_back(r);
  }
  return rows;
}

}  // namespace

std::optional<std::string> finding_not_positive(const Tensor& out, const RefTensor* ref) {
  if (!dtype_is_float(out.dtype())) return std::nullopt;
  std::int64_t n = 0, nr = 0;
  const std::int64_t first = bad_scales(out, n);
  if (first < 0 || (ref && ref->value.numel() == out.numel() && bad_scales(ref->value, nr) >= 0)) return std::nullopt;
  return "B5: " + std::to_string(n) + " scale(s) not finite and positive; first at " +
         (ref ? detail::describe(*ref, first) : "element " + std::to_string(first)) + " = " + detail::fmt(out.value(first));
}

std::vector<std::int64_t> constant_rows_unlike_ref(const Tensor& out, const RefTensor* ref) {
  if (!dtype_is_float(out.dtype())) return {};
  const std::uint8_t* def = (ref && ref->defined.defined()) ? ref->defined.data<std::uint8_t>() : nullptr;
  auto rows = constant_rows(out, def);
  if (!rows.empty() && ref && ref->value.numel() == out.numel()) {
    const auto rr = constant_rows(ref->value, def);
    std::erase_if(rows, [&](std::int64_t r) { return std::find(rr.begin(), rr.end(), r) != rr.end(); });
  }
  if (ref && ref->flat_offset > 0 && out.rank() >= 2 && out.dim(0) > 0) {
    const std::int64_t row0 = ref->flat_offset / (out.numel() / out.dim(0));
    for (auto& r : rows) r += row0;
  }
  return rows;
}

std::string constant_rows_finding(std::size_t count, std::int64_t first_row) {
  return "B6: " + std::to_string(count) + " logit row(s) constant although the reference is not; first row " + std::to_string(first_row);
}

std::optional<std::string> finding_constant_rows(const Tensor& out, const RefTensor* ref) {
  const auto rows = constant_rows_unlike_ref(out, ref);
  if (rows.empty()) return std::nullopt;
  return constant_rows_finding(rows.size(), rows.front());
}

std::optional<std::string> finding_positional_topk(const Tensor& out, const RefTensor& ref) {
  if (ref.kind != CompareKind::topk_set || !ref.topk.from_index || out.numel() == 0) return std::nullopt;
  const TopkRef& t = ref.topk;
  const auto R = static_cast<std::int64_t>(t.len.size());
  const std::int64_t W = R ? out.numel() / R : 0;
  std::int64_t rows = 0, first = -1;
  for (std::int64_t r = 0; r < R && W >= t.k; ++r) {
    const std::int64_t L = t.len[static_cast<std::size_t>(r)];
    if (L <= t.k) continue;
    bool positional = true;
    for (std::int64_t i = 0; i < t.k && positional; ++i) positional = out.int_at(r * W + i) == t.to_index(r, i);
    if (!positional) continue;
    const double tau = t.kth[static_cast<std::size_t>(r)];
    const double* sc = t.scores.data<double>() + r * t.scores.dim(1);
    bool allowed = true;  // exact scores admit the positional prefix (all-tie rows)
    for (std::int64_t p = 0; p < L && allowed; ++p) allowed = p < t.k ? !(sc[p] < tau) : !(sc[p] > tau);
    if (allowed) continue;
    if (first < 0) first = r;
    ++rows;
  }
  if (!rows) return std::nullopt;
  return "B22: " + std::to_string(rows) + " row(s) with len > k select exactly the first k positions (sparsity not "
         "engaged); first row " + std::to_string(first);
}

}  // namespace dsa::cmp
