// indexer.prolog: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/det_math.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/prolog/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::prolog {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

namespace {

// RoPE tables of the demo (spec v32 §2.2): f_i = 10000^(-2i/64), YaRN (factor 40, low 10, high 23),
// theta = fl32(pos * f_i'), cos/sin in double (deterministic series) rounded to fp32.
void rope_tables(const std::vector<std::int64_t>& pos, std::int64_t R2, Tensor& cs, Tensor& sn) {
  const std::int64_t T = static_cast<std::int64_t>(pos.size());
  cs = Tensor(DType::f32, {T, R2});
  sn = Tensor(DType::f32, {T, R2});
  // r = 10000^(-1/32) (double, from Python); f_i = r^(i * 32 / R2) for R2 = 32.
  const double r = 0x1.7ff2224115d9ap-1;
  std::vector<float> f(static_cast<std::size_t>(R2));
  double fi = 1.0;
  for (std::int64_t i = 0; i < R2; ++i) {
    const float base = f32(fi);
    const double ramp = std::clamp((static_cast<double>(i) - 10.0) / 13.0, 0.0, 1.0);
    const float smooth = f32(1.0 - ramp);
    f[static_cast<std::size_t>(i)] = base / 40.0f * (1.0f - smooth) + base * smooth;
    for (std::int64_t k = 0; k < 32 / R2; ++k) fi *= r;
  }
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < R2; ++i) {
      const float th = static_cast<float>(pos[static_cast<std::size_t>(t)]) * f[static_cast<std::size_t>(i)];
      cs.data<float>()[t * R2 + i] = f32(num::det_cos(th));
      sn.data<float>()[t * R2 + i] = f32(num::det_sin(th));
    }
}

void gen_prolog(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 16), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  const std::int64_t rope_dim = c.attr_int("rope_dim");
  Tensor q(DType::bf16, {T, H, D}), k(DType::bf16, {T, D}), w(DType::f32, {T, H});
  for_rows(root, kQ, T * H, threads, [&](std::int64_t r, Rng& rng) {
    for (std::int64_t d = 0; d < D; ++d) q.data<std::uint16_t>()[r * D + d] = num::f64_to_bf16(gauss_outlier(rng, 1.0, 0.004));
  });
  // k before LayerNorm: per-token mean and spread, so the normalization matters.
  for_rows(root, kK, T, threads, [&](std::int64_t t, Rng& rng) {
    const double mu = rng.uniform(-2.0, 2.0), sd = rng.uniform(0.25, 4.0);
    for (std::int64_t d = 0; d < D; ++d) k.data<std::uint16_t>()[t * D + d] = num::f64_to_bf16(mu + gauss_outlier(rng, sd, 0.004));
  });
  for_rows(root, kW, T, threads, [&](std::int64_t t, Rng& rng) {
    for (std::int64_t h = 0; h < H; ++h) w.data<float>()[t * H + h] = f32(rng.normal() * 0.125);
  });
  Tensor lw(DType::f32, {D}), lb(DType::f32, {D});  // checkpoint stores bf16: bf16-representable fp32
  {
    Rng a = root.fork(kLnW), b = root.fork(kLnB);
    for (std::int64_t d = 0; d < D; ++d) {
      lw.data<float>()[d] = num::bf16_to_f32(num::f64_to_bf16(1.0 + 0.2 * a.normal()));
      lb.data<float>()[d] = num::bf16_to_f32(num::f64_to_bf16(0.1 * b.normal()));
    }
  }
  // Positions: chunked prefill from start_pos (list "positions" overrides).
  std::vector<std::int64_t> pos = list_or(s, "positions", {});
  if (pos.empty())
    for (std::int64_t t = 0; t < T; ++t) pos.push_back(s.dim("start_pos", 0) + t);
  if (static_cast<std::int64_t>(pos.size()) != T) throw std::invalid_argument(s.name + ": list positions must have T entries");
  Tensor cs, sn;
  rope_tables(pos, rope_dim / 2, cs, sn);
  Tensor pt(DType::i64, {T});
  for (std::int64_t t = 0; t < T; ++t) pt.data<std::int64_t>()[t] = pos[static_cast<std::size_t>(t)];
  c.inputs = {{"q", q}, {"k", k}, {"w", w}, {"ln_weight", lw}, {"ln_bias", lb}, {"cos", cs}, {"sin", sn}, {"positions", pt}};
}


}  // namespace

std::vector<Generator> generators() {
  return {
      {"prolog.gaussian", "indexer.prolog",
       "q bf16 N(0,1)+outliers [T,H,D]; k bf16 with per-token mean/spread (LayerNorm matters); w = N(0,1)/8 fp32; "
       "LayerNorm weight/bias bf16-valued fp32; YaRN RoPE cos/sin tables for positions start_pos.. (or list positions). "
       "dims T, H, D, start_pos",
       gen_prolog}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "prolog_nonfinite_rows", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 203,
       .dims = {{"T", 4}, {"start_pos", 10}}, .attrs = {{"rope_layout", S("neox")}, {"hadamard", I(1)}},
       .poison = {{"q", 1, 5, kNaN}, {"k", 2, -1, kInf}, {"w", 3, 0, -kInf}, {"k", 3, 70, kNaN}},
       .doc = "NaN policy: a NaN in q (Hadamard spreads it over its head), an all-inf k row (LayerNorm gives NaN), -inf gate, NaN in k's rope part"},
      {.name = "prolog_neox_hadamard", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 201,
       .dims = {{"T", 12}, {"start_pos", 4090}}, .attrs = {{"rope_layout", S("neox")}, {"hadamard", I(1)}},
       .doc = "V3.2 demo path: LayerNorm k, NeoX RoPE (YaRN tables, positions across 4096), Hadamard-128, ue8m0 act_quant"},
      {.name = "prolog_interleaved_no_hadamard", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 202,
       .dims = {{"T", 8}, {"start_pos", 0}}, .attrs = {{"rope_layout", S("interleaved")}, {"hadamard", I(0)}},
       .doc = "engine variants: interleaved RoPE (GLM-5 style / the pre-fix demo bug) and no Hadamard (vLLM)"},
  };
}

}  // namespace dsa::indexer::prolog
