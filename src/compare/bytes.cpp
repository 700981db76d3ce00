// bytes comparator: exact bit equality per element (quantized codes, scales, cache pages, ordered indices).
#include <cmath>
#include <sstream>

#include "compare/compare.hpp"
#include "compare/detail.hpp"

namespace dsa::cmp {

CheckResult compare_bytes(const Tensor& out, const RefTensor& ref) {
  CheckResult r;
  r.kind = CompareKind::bytes;
  r.tensor = ref.name;
  const Tensor& v = ref.value;
  r.numel = v.numel();
  const bool fl = dtype_is_float(v.dtype());
  const std::uint8_t* def = ref.defined.defined() ? ref.defined.data<std::uint8_t>() : nullptr;
  std::int64_t nonfinite = 0;
  double worst_d = -1;
  for (std::int64_t i = 0; i < v.numel(); ++i) {
    if (def && !def[i]) continue;
    if (out.bits(i) == v.bits(i)) continue;
    ++r.mismatches;
    const double o = out.value(i), e = v.value(i);
    if (fl && !std::isfinite(o) && std::isfinite(e)) ++nonfinite;
    double d = std::fabs(o - e);
    if (std::isnan(d)) d = std::numeric_limits<double>::infinity();
    if (!r.first) r.first = Location{i, {}, o, e, d, 0.0};
    if (d > worst_d) {
      worst_d = d;
      r.worst = Location{i, {}, o, e, d, 0.0};
    }
  }
  for (auto* l : {&r.first, &r.worst})  // decoded only for the locations kept
    if (*l) (*l)->where = detail::describe(ref, (*l)->flat);
  std::ostringstream m;
  if (r.mismatches == 0) {
    r.verdict = Verdict::BITEXACT;
    m << "bit-exact (" << r.numel << " elements)";
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
