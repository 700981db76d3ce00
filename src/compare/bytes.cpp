// bytes comparator: exact bit equality per element (quantized codes, scales, cache pages, ordered indices).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {

CheckResult compare_bytes(const Tensor& out, const RefTensor& ref, NanPolicy nan) {
  CheckResult r;
  r.kind = CompareKind::bytes;
  r.tensor = ref.name;
  const Tensor& v = ref.value;
  r.numel = v.numel();
  const bool fl = dtype_is_float(v.dtype());
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  std::int64_t nonfinite = 0, nan_codes = 0, first_nan = -1, cand = 0, first_cand = -1;
  auto candidate = [&](std::int64_t i) {  // the output is one of the patterns the reference accepts here
    if (!ref.candidates) return false;
    auto it = ref.candidates->find(i);
    return it != ref.candidates->end() && std::find(it->second.begin(), it->second.end(), out.bits(i)) != it->second.end();
  };
  double worst_d = -1;
  // Identical bytes (the common case of a correct kernel): one memcmp per 1 MiB block, no per-element decoding.
  // Blocks that differ, and the elements the reference leaves undefined, go through the element loop below.
  const std::int64_t es = static_cast<std::int64_t>(dtype_size(v.dtype()));
  const std::int64_t block = std::max<std::int64_t>(1, (std::int64_t{1} << 20) / es);
  const bool same_layout = out.dtype() == v.dtype() && out.numel() == v.numel();
  for (std::int64_t b0 = 0; b0 < v.numel(); b0 += block) {
    const std::int64_t b1 = std::min(v.numel(), b0 + block);
    if (same_layout && std::memcmp(out.raw() + b0 * es, v.raw() + b0 * es, static_cast<std::size_t>((b1 - b0) * es)) == 0) continue;
  for (std::int64_t i = b0; i < b1; ++i) {
    if (def && !def[i]) continue;
    if (out.bits(i) == v.bits(i)) continue;
    if (candidate(i)) {
      if (cand++ == 0) first_cand = i;
      continue;
    }
    const double o = out.value(i), e = v.value(i);
    if (fl && nan == NanPolicy::any_code && std::isnan(o) && std::isnan(e)) {  // another NaN code of the same format
      if (nan_codes++ == 0) first_nan = i;
      continue;
    }
    ++r.mismatches;
    if (fl && !std::isfinite(o) && std::isfinite(e)) ++nonfinite;
    double d = std::fabs(o - e);
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    if (!r.first) r.first = detail::location(out, v, i, {}, d, 0.0);
    if (d > worst_d) {
      worst_d = d;
      r.worst = detail::location(out, v, i, {}, d, 0.0);
    }
  }
  }
  for (auto* l : {&r.first, &r.worst})  // decoded only for the locations kept
    if (*l) (*l)->where = detail::describe(ref, (*l)->flat);
  std::ostringstream m;
  if (r.mismatches == 0 && cand > 0) {
    r.verdict = Verdict::WITHIN_BOUND;
    const std::string n = std::to_string(cand) + " element(s) at an accepted candidate pattern instead of the reference's (first at " +
                          detail::describe(ref, first_cand) + ": out 0x" + detail::hex_bits(out, first_cand) + ", ref 0x" +
                          detail::hex_bits(v, first_cand) + "), every other element bit-exact";
    m << "within candidates (" << r.numel << " elements): " << n;
    r.notes.push_back(n);
  } else if (r.mismatches == 0) {
    r.verdict = Verdict::BITEXACT;
    m << "bit-exact (" << r.numel << " elements)";
    if (nan_codes) {
      const std::string n = std::to_string(nan_codes) + " NaN element(s) carry another NaN code than the reference (first at " +
                            detail::describe(ref, first_nan) + ": out 0x" + detail::hex_bits(out, first_nan) + ", ref 0x" +
                            detail::hex_bits(v, first_nan) + "); equal under the NaN policy (--nan-bits exact to require the same code)";
      m << " up to NaN codes: " << n;
      r.notes.push_back(n);
    }
  } else {
    r.verdict = nonfinite ? Verdict::NONFINITE : Verdict::FAIL;
    m << r.mismatches << " of " << r.numel << " elements differ";
    if (nonfinite) m << " (" << nonfinite << " non-finite where the reference is finite)";
    m << "; first at " << detail::loc_str(*r.first) << "; worst at " << detail::loc_str(*r.worst);
  }
  r.message = m.str();
  return r;
}

}  // namespace dsa::cmp
