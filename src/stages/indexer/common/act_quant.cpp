#include "stages/indexer/common/act_quant.hpp"

#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"

namespace dsa::indexer {

ScaleFmt parse_scale_fmt(const std::string& s) {
  if (s == "ue8m0") return ScaleFmt::ue8m0;
  if (s == "fp32_div") return ScaleFmt::fp32_div;
  if (s == "fp32_mul") return ScaleFmt::fp32_mul;
  throw std::invalid_argument("scale_fmt must be ue8m0, fp32_div or fp32_mul, found '" + s + "'");
}

ScaleApply parse_scale_apply(const std::string& s) {
  if (s == "div") return ScaleApply::div;
  if (s == "mul_inv") return ScaleApply::mul_inv;
  throw std::invalid_argument("scale_apply must be div or mul_inv, found '" + s + "'");
}

float quantize_block(const float* x, std::int64_t n, const QuantParams& p, std::uint8_t* y) {
  float amax = 0.0f;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) nan = true;
    amax = std::fmax(amax, std::fabs(x[i]));  // exact: max of magnitudes
  }
  if (nan) amax = std::numeric_limits<float>::quiet_NaN();
  float s;
  switch (p.fmt) {
    case ScaleFmt::ue8m0: s = num::ue8m0_scale(amax, p.amax_eps); break;
    case ScaleFmt::fp32_div: s = num::fp32_scale_div(amax, p.amax_eps); break;
    default: s = num::fp32_scale_mul(amax, p.amax_eps); break;
  }
  const float inv = 1.0f / s;  // fl32(1/s), used by the mul_inv form only
  for (std::int64_t i = 0; i < n; ++i) {
    float v = p.apply == ScaleApply::div ? x[i] / s : x[i] * inv;
    if (p.clamp && !std::isnan(v)) v = std::fmin(std::fmax(v, -448.0f), 448.0f);
    y[i] = num::f32_to_e4m3(v);
  }
  return s;
}

}  // namespace dsa::indexer
