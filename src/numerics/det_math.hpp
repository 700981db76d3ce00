// Deterministic elementary functions (+, *, and exactly rounded IEEE operations only: no libm, no intrinsics), so the
// bits are the same on every machine, compiler and backend.
#pragma once

namespace dsa::num {

// sin/cos: x = n*(pi/2) + r (Cody-Waite, 3-part pi/2), Taylor series on |r| <= pi/4; within 1 ulp of libm.
double det_sin(double x);
double det_cos(double x);

}  // namespace dsa::num
