// Known sparse MLA bugs as values: the row engine on one head with the bug applied to its inputs or conventions.
#include "engines/sparse_attn/mla_hypotheses.hpp"

#include <cmath>

#include "engines/sparse_attn/sparse_attn.hpp"
#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"

namespace dsa::attn {

namespace {
constexpr double kScale576 = 0.041666666666666664;  // 576^-0.5 = 1/24 exactly rounded
}

std::optional<Hypothesis::Value> mla_bug_value(const MlaElement& e, MlaBug bug) {
  const bool lse_part = e.part == "lse" || e.part == "max_logits";
  if (bug == MlaBug::lse_other_base && !lse_part) return std::nullopt;
  if (bug == MlaBug::sink_in_numerator && e.part != "out") return std::nullopt;
  if ((bug == MlaBug::sink_dropped || bug == MlaBug::sink_in_numerator) && !e.sink) return std::nullopt;
  if (bug == MlaBug::sink_dropped && e.part == "max_logits") return std::nullopt;
  if (bug == MlaBug::scale_576 && e.scale == kScale576) return std::nullopt;
  if (bug == MlaBug::minus_one_as_token0 && e.ids_minus1.size() == e.ids.size()) return std::nullopt;
  if (e.part == "out" && (e.dim < 0 || e.dim >= e.dv)) return std::nullopt;
  const std::vector<std::int64_t>& ids = bug == MlaBug::minus_one_as_token0 ? e.ids_minus1 : e.ids;
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  RowEngine eng;
  eng.reset(1, e.D, e.dv, n);
  for (std::int64_t d = 0; d < e.D; ++d)
    eng.q(0)[d] = bug == MlaBug::rope_dropped && d >= e.D - e.rope ? 0.0 : num::bf16_to_f64(e.q[d]);
  for (std::int64_t j = 0; j < n; ++j) e.key(ids[static_cast<std::size_t>(j)], eng.key(j));
  eng.run(bug == MlaBug::scale_576 ? kScale576 : e.scale);
  const RowView v = eng.view();
  Conventions cv = e.cv;
  if (bug == MlaBug::lse_other_base) cv.base2 = !cv.base2;
  const float* sink = bug == MlaBug::sink_dropped ? nullptr : e.sink;
  std::vector<std::uint16_t> out(static_cast<std::size_t>(e.dv));
  std::vector<double> out_m(out.size());
  float lse = 0, ml = 0;
  double lse_m = 0, ml_m = 0;
  std::uint8_t lse_def = 0, ml_def = 0;
  write_head(v, 0, e.dv, sink, cv, HeadDst{out.data(), out_m.data(), &lse, &lse_m, &lse_def, &ml, &ml_m, &ml_def});
  if (e.part == "lse") return lse_def ? std::optional<Hypothesis::Value>({lse, lse_m}) : std::nullopt;
  if (e.part == "max_logits") return ml_def ? std::optional<Hypothesis::Value>({ml, ml_m}) : std::nullopt;
  const auto d = static_cast<std::size_t>(e.dim);
  double val = num::bf16_to_f64(out[d]);
  if (bug == MlaBug::sink_in_numerator && !v.head(0).lonely && !v.head(0).nan)
    val = num::bf16_to_f64(num::f64_to_bf16(val + 1.0 - 1.0 / (1.0 + num::det_exp(static_cast<double>(*e.sink) - v.head(0).lse))));
  return Hypothesis::Value{val, out_m[d]};
}

std::vector<Hypothesis> mla_hypotheses(const std::vector<std::string>& tensors, MlaLocate locate) {
  struct One {
    MlaBug bug;
    const char* id;
    const char* doc;
  };
  static const One kBugs[] = {
      {MlaBug::lse_other_base, "B35 lse base", "lse / max_logits in the other base: log2 units = natural x 1.4427, or the reverse"},
      {MlaBug::scale_576, "v32 §6.2 softmax_scale", "softmax scale 576^-0.5 (FlashMLA's V3.2 default) instead of the case's"},
      {MlaBug::rope_dropped, "v32 §7 RoPE", "the 64 RoPE dims left out of q.k"},
      {MlaBug::minus_one_as_token0, "B34", "index -1 read as token 0 instead of masked"},
      {MlaBug::sink_dropped, "B35 sink", "attn_sink not applied"},
      {MlaBug::sink_in_numerator, "B35 sink numerator", "the sink as a key with an all-ones value"}};
  std::vector<Hypothesis> hs;
  for (const std::string& t : tensors)
    for (const One& b : kBugs) {
      if (b.bug == MlaBug::lse_other_base && t == "out") continue;
      if (b.bug == MlaBug::sink_in_numerator && t != "out") continue;
      if (b.bug == MlaBug::sink_dropped && t == "max_logits") continue;
      hs.push_back({t, b.id, b.doc, [locate, t, bug = b.bug](const Case& c, const dsa::Params& p, std::int64_t flat) -> std::optional<Hypothesis::Value> {
                      MlaElement e;
                      if (!locate(c, p, t, flat, e)) return std::nullopt;
                      e.part = t;
                      return mla_bug_value(e, bug);
                    },
                    {}});
    }
  return hs;
}

}  // namespace dsa::attn
