#include "numerics/det_math.hpp"

#include <cmath>
#include <cstdint>

namespace dsa::num {

namespace {
double sin_poly(double r) {
  const double r2 = r * r;
  double t = r, s = r;
  for (int i = 1; i <= 11; ++i) {
    t = -t * r2 / static_cast<double>((2 * i) * (2 * i + 1));
    s = s + t;
  }
  return s;
}
double cos_poly(double r) {
  const double r2 = r * r;
  double t = 1.0, s = 1.0;
  for (int i = 1; i <= 11; ++i) {
    t = -t * r2 / static_cast<double>((2 * i - 1) * (2 * i));
    s = s + t;
  }
  return s;
}
void reduce(double x, double& r, std::int64_t& q) {
  const double inv_pio2 = 0x1.45f306dc9c883p-1;
  const double p1 = 0x1.921fb54400000p+0, p2 = 0x1.0b4611a600000p-34, p3 = 0x1.3198a2e037073p-69;
  const double n = std::nearbyint(x * inv_pio2);  // exact integer (round to nearest even; IEEE, not libm math)
  r = ((x - n * p1) - n * p2) - n * p3;
  q = static_cast<std::int64_t>(n);
}
}  // namespace

double det_sin(double x) {
  double r;
  std::int64_t q;
  reduce(x, r, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return sin_poly(r);
    case 1: return cos_poly(r);
    case 2: return -sin_poly(r);
    default: return -cos_poly(r);
  }
}
double det_cos(double x) {
  double r;
  std::int64_t q;
  reduce(x, r, q);
  switch (((q % 4) + 4) % 4) {
    case 0: return cos_poly(r);
    case 1: return -sin_poly(r);
    case 2: return -cos_poly(r);
    default: return sin_poly(r);
  }
}

}  // namespace dsa::num
