#include "engines/sparse_attn/softmax_scale.hpp"

#include <cmath>

#include "compare/detail.hpp"

namespace dsa::sparse_attn {

std::vector<AttrSpec> softmax_scale_attrs(const std::string& doc) {
  AttrSpec s{"softmax_scale", AttrType::number, false, std::nullopt, {}, doc};
  AttrSpec alias{"sm_scale", AttrType::number, false, std::nullopt, {},
                 "alias of softmax_scale (flash_mla_sparse_fwd's argument name); both on one case must agree"};
  return {s, alias};
}

double inv_sqrt(std::int64_t d) {
  // 1/sqrt(d) in 64-bit-mantissa long double, then one rounding to double: exact for perfect squares (576 -> 1/24) and
  // correctly rounded for 512 (2^-4.5) and 128 (2^-3.5) (the test checks them against Python's values).
  const long double r = 1.0L / std::sqrt(static_cast<long double>(d));
  return static_cast<double>(r);
}

double softmax_scale(const Case& c, const AttrReader& a, std::optional<double> derived, const std::string& derived_doc,
                     std::vector<Problem>& p) {
  const bool has_s = a.has("softmax_scale"), has_alias = a.has("sm_scale");
  double v = 0;
  if (has_s) v = a.f("softmax_scale");
  if (has_alias) {
    const double w = a.f("sm_scale");
    if (has_s && !(w == v)) {
      p.push_back({c.file, c.name, "attr sm_scale",
                   "the same value as softmax_scale (" + cmp::detail::exact(v) + "; sm_scale is its alias)", cmp::detail::exact(w)});
      return v;
    }
    v = w;
  }
  if (!has_s && !has_alias) {
    if (!derived) {
      p.push_back({c.file, c.name, "attr softmax_scale", "a number: " + derived_doc, "none"});
      return 0;
    }
    return *derived;
  }
  if (!std::isfinite(v))
    p.push_back({c.file, c.name, std::string("attr ") + (has_s ? "softmax_scale" : "sm_scale"), "a finite number", cmp::detail::exact(v)});
  return v;
}

}  // namespace dsa::sparse_attn
