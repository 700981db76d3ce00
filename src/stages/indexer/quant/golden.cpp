// indexer.quant: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/quant/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::quant {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

namespace {

enum class QuantDist { gaussian_outliers, saturation, subnormal };

void gen_quant(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, QuantDist dist) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 64), K = s.dim("K", 512);
  const std::int64_t bs = c.attr_int("block_size");
  const bool f32_in = s.param("f32_input", 0) != 0;
  Tensor x(f32_in ? DType::f32 : DType::bf16, {T, K});
  const double sigma = s.param("sigma", 1.0), p_out = s.param("outlier_p", 0.01);
  for_rows(root, kX, T, threads, [&](std::int64_t t, Rng& rng) {
    std::vector<double> v(static_cast<std::size_t>(K));
    for (std::int64_t b0 = 0; b0 < K; b0 += bs) {
      const std::int64_t n = std::min(bs, K - b0);
      double* blk = v.data() + b0;
      switch (dist) {
        case QuantDist::gaussian_outliers: {
          const bool zero_block = s.param("zero_block_every", 0) > 0 &&
                                  t % static_cast<std::int64_t>(s.param("zero_block_every", 0)) == 0 && b0 == 0;
          for (std::int64_t i = 0; i < n; ++i) blk[i] = zero_block ? 0.0 : gauss_outlier(rng, sigma, p_out);
          break;
        }
        case QuantDist::saturation: {
          // amax A anywhere in 2^[-10, 10]; many elements at +-A or within 3% of it, so x/s lands at or just
          // below 448 (and above it with fp32 scales before the clamp).
          const double A = num::bf16_to_f32(num::f64_to_bf16(pow2(rng.randint(-10, 10)) * rng.uniform(1.0, 2.0)));
          for (std::int64_t i = 0; i < n; ++i) {
            const double u = rng.uniform();
            const double sg = rng.uniform() < 0.5 ? -1.0 : 1.0;
            blk[i] = u < 0.1 ? sg * A : u < 0.3 ? sg * A * rng.uniform(0.97, 1.0) : rng.uniform(-1.0, 1.0) * A;
          }
          break;
        }
        case QuantDist::subnormal: {
          // One element at +-A, the rest 2^-6..2^-14 below it: their codes are e4m3 subnormals or round to 0.
          // Every 8th block lies entirely below the amax clamp (1e-4): the eps path.
          const bool tiny = rng.uniform() < 0.125;
          const double A = tiny ? pow2(rng.randint(-30, -15)) : pow2(rng.randint(-4, 4)) * rng.uniform(1.0, 2.0);
          const std::int64_t at = rng.randint(0, n - 1);
          for (std::int64_t i = 0; i < n; ++i)
            blk[i] = i == at ? (rng.uniform() < 0.5 ? -A : A) : A * pow2(-rng.randint(6, 14)) * rng.normal();
          break;
        }
      }
    }
    for (std::int64_t i = 0; i < K; ++i) {
      if (f32_in) x.data<float>()[t * K + i] = f32(v[static_cast<std::size_t>(i)]);
      else x.data<std::uint16_t>()[t * K + i] = num::f64_to_bf16(v[static_cast<std::size_t>(i)]);
    }
  });
  c.inputs["x"] = x;
}

GenerateFn quant_gen(QuantDist d) {
  return [d](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { gen_quant(s, seed, th, c, d); };
}

}  // namespace

std::vector<Generator> generators() {
  return {
      {"quant.gaussian_outliers", "indexer.quant",
       "bf16 N(0, sigma) activations, outliers x2^U{3..10} with prob outlier_p; every zero_block_every-th row has an "
       "all-zero first block (amax clamp). dims T, K; params sigma, outlier_p, zero_block_every, f32_input",
       quant_gen(QuantDist::gaussian_outliers)},
      {"quant.fp8_saturation", "indexer.quant",
       "per block amax A in 2^[-10,10]; 10% of elements +-A, 20% within 3% of A: x/s at or just below 448 (above it "
       "before the clamp with fp32 scales). dims T, K",
       quant_gen(QuantDist::saturation)},
      {"quant.subnormal", "indexer.quant",
       "one element +-A per block, the rest 2^-6..2^-14 below it (e4m3 subnormal codes, rounding to 0); 1/8 of the "
       "blocks entirely below the 1e-4 amax clamp. dims T, K",
       quant_gen(QuantDist::subnormal)}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "quant_nonfinite_rows", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 106,
       .dims = {{"T", 6}, {"K", 256}}, .attrs = {{"scale_fmt", S("ue8m0")}},
       .poison = {{"x", 1, -1, kNaN}, {"x", 2, 3, kInf}, {"x", 3, 130, -kInf}, {"x", 4, 0, kNaN}, {"x", 4, 200, kInf}},
       .doc = "NaN policy: an all-NaN row, one +inf, one -inf, a NaN and +inf in two blocks of a row (CUDA-canonical NaN codes in y and scale)"},
      {.name = "quant_gaussian_outliers", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 101,
       .dims = {{"T", 64}, {"K", 512}}, .params = {{"outlier_p", 0.01}, {"zero_block_every", 16}},
       .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "bf16 activations with outliers (one outlier squashes its block into subnormal codes); zero blocks hit the 1e-4 amax clamp"},
      {.name = "quant_saturation_fp32_scales", .stage = "indexer.quant", .generator = "quant.fp8_saturation", .seed = 102,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("fp32_div")}, {"scale_apply", S("mul_inv")}},
       .doc = "amax/448 scales with x*fl32(1/s): products just above 448 must be clamped (DeepGEMM test quantizer)"},
      {.name = "quant_saturation_ue8m0", .stage = "indexer.quant", .generator = "quant.fp8_saturation", .seed = 103,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "pow2 scales with amax at or near 448*2^e: codes 0x7E/0xFE at the top of the range"},
      {.name = "quant_subnormal", .stage = "indexer.quant", .generator = "quant.subnormal", .seed = 104,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "e4m3 subnormal codes and underflow to 0, tie rounding at 2^-9 quanta; blocks below the amax clamp"},
      {.name = "quant_f32_input_fp32_mul", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 105,
       .dims = {{"T", 16}, {"K", 256}}, .params = {{"f32_input", 1}, {"outlier_p", 0.02}},
       .attrs = {{"scale_fmt", S("fp32_mul")}},
       .doc = "fp32 input, demo scale_fmt=None: s = fl32(amax*fl32(1/448)), not pow2, so x/s rounds"},
  };
}

}  // namespace dsa::indexer::quant
