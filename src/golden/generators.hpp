// Named input generators for golden cases. Each builds the `inputs/` of one stage the way an engine would
// feed them (fp8 codes and scales come from act_quant of bf16 data, head gates W = fl32(fl32(w*q_scale)*128^-0.5),
// paged caches in the planar page layout), from a seed only: every random value comes from src/golden/rng.hpp
// (libm-free) with one sub-stream per (tensor, row), so the bits are the same on every machine and for every
// thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "golden/catalogue.hpp"
#include "tensor/case.hpp"

namespace dsa::golden {

using GenerateFn = std::function<void(const GoldenSpec& spec, std::uint64_t seed, int threads, Case& out)>;

struct Generator {
  std::string name;
  std::string stage;
  std::string doc;  // distribution and the dims/lists/params it reads
  GenerateFn fn;
};

const std::vector<Generator>& generators();
const Generator* find_generator(const std::string& name);

// Deterministic cos/sin (double Taylor series with Cody-Waite reduction, + and * only): identical bits
// everywhere, within 1 ulp of libm. Exposed for the tests.
double det_sin(double x);
double det_cos(double x);

}  // namespace dsa::golden
