// attn.v4_out: input generator and golden catalogue rows (docs/golden.md).
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rope.hpp"
#include "stage/gen/index_rows.hpp"
#include "stages/attn/v4_out/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::v4_out {

using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::kInf;
using golden::kNaN;

namespace {

using i64 = std::int64_t;
enum Stream : std::uint64_t { kO = 1, kWa, kWb, kPos };

// dims T, N, D, R (o_lora_rank), dim; attr o_groups; params o_sigma, wa_sigma, wb_sigma. The cos/sin rows are the V4
// compressed-layer table (base 160000, YaRN 16) at random positions up to 2^20, interleave-duplicated.
void gen_tokens(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  (void)threads;
  const Rng root(seed);
  const i64 T = s.dim("T", 4), N = s.dim("N", 64), D = s.dim("D", 512), R = s.dim("R", 1024), dim = s.dim("dim", 4096);
  auto it = s.attrs.find("o_groups");
  const i64 G = it == s.attrs.end() ? 8 : std::get<i64>(it->second);
  if (G < 1 || N % G != 0) throw std::invalid_argument(s.name + ": N must be a multiple of o_groups");
  Tensor o(DType::bf16, {T, N, D}), cs(DType::f32, {T, 64}), sn(DType::f32, {T, 64});
  Tensor wa(DType::bf16, {G * R, N * D / G}), wb(DType::bf16, {dim, G * R});
  const Rng ro = root.fork(kO);
  for (i64 i = 0; i < T * N; ++i) {
    Rng r = ro.fork(static_cast<std::uint64_t>(i));
    gen::bf16_normal(r, s.param("o_sigma", 0.5), D, o.data<std::uint16_t>() + i * D);
  }
  Rng ra = root.fork(kWa);
  gen::bf16_normal(ra, s.param("wa_sigma", 0.02), wa.numel(), wa.data<std::uint16_t>());
  Rng rb = root.fork(kWb);
  gen::bf16_normal(rb, s.param("wb_sigma", 0.02), wb.numel(), wb.data<std::uint16_t>());
  Rng rp = root.fork(kPos);
  for (i64 t = 0; t < T; ++t) num::v4_rope_row(64, rp.randint(0, 1 << 20), cs.data<float>() + t * 64, sn.data<float>() + t * 64);
  c.inputs = {{"o", o}, {"cos", cs}, {"sin", sn}, {"wo_a", wa}, {"wo_b", wb}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"v4_out.tokens", "attn.v4_out",
           "o bf16 N(0, o_sigma) [T, N, D]; wo_a [G*R, N*D/G], wo_b [dim, G*R] bf16 N(0, wa_sigma / wb_sigma); cos/sin rows of "
           "the V4 compressed-layer RoPE table (base 160000, YaRN 16) at random positions < 2^20. dims T, N, D, R, dim; attr "
           "o_groups",
           gen_tokens}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "attn.v4_out";
  const char* g = "v4_out.tokens";
  return {
      {.name = "v4out_small_groups", .stage = st, .generator = g, .seed = 1601,
       .dims = {{"T", 5}, {"N", 8}, {"D", 512}, {"R", 32}, {"dim", 128}}, .attrs = {{"o_groups", I(4)}},
       .doc = "4 groups of 2 heads (512 dims, 64 rope), o_lora_rank 32: inverse RoPE at large positions, grouped wo_a, wo_b"},
      {.name = "v4out_nonfinite", .stage = st, .generator = g, .seed = 1602,
       .dims = {{"T", 3}, {"N", 8}, {"D", 512}, {"R", 32}, {"dim", 64}}, .attrs = {{"o_groups", I(2)}},
       .poison = {{"o", 0, 5, kNaN}, {"o", 1, 4 * 512 + 500, kInf}},
       .doc = "NaN policy: a NaN in a nope dim of token 0 head 0 and +inf in a rope dim of token 1 head 4: NaN/inf in o_rot, "
              "that group's o_lora and the token's output"},
      {.name = "v4out_flash", .stage = st, .generator = g, .seed = 1603,
       .dims = {{"T", 8}, {"N", 64}, {"D", 512}, {"R", 1024}, {"dim", 4096}}, .attrs = {{"o_groups", I(8)}},
       .committed = false,
       .doc = "V4-Flash dims: 64 heads, 8 groups, o_lora_rank 1024, dim 4096 (wo_a / wo_b 64 MB each)"},
  };
}

}  // namespace dsa::attn::v4_out
