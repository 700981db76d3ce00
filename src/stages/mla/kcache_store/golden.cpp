// mla.kcache_store: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a
// row changes the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh reports.
#include <cmath>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/gen.hpp"
#include "stages/mla/kcache_store/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::mla::kcache_store {

using namespace gen;
using golden::Generator;
using golden::GoldenSpec;
using golden::I;
using golden::S;

namespace {

using L = layouts::MlaKCache;

// c: per token and tile, N(0, 2^U{-3..3}) with outliers; a fraction of tiles all zero (zero-tile scale rules) and one
// tile per token holding an exact power-of-two amax 448 * 2^e (ties of the ceil(log2) rules).
void gen_mla_kcache(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 48), P = s.dim("P", 1), ps = s.model.page_size;
  if (T > P * ps) throw std::invalid_argument(s.name + ": T must be <= P * page_size");
  auto lay = s.attrs.find("layout");
  const bool m1 = lay != s.attrs.end() && std::get<std::string>(lay->second) == layouts::Model1KCache::kName;
  using M = layouts::Model1KCache;
  const std::int64_t nope = m1 ? M::kNope : L::kNope, tile = m1 ? M::kTile : L::kTile, tiles = m1 ? M::kTiles : L::kTiles;
  const std::int64_t rec = m1 ? M::kRecord : L::kRecord;
  const double zero_frac = s.param("zero_tile_frac", 0.1);
  Tensor kc(DType::bf16, {T, nope}), pe(DType::bf16, {T, L::kRope});
  for_rows(root, kKv, T, threads, [&](std::int64_t t, Rng& rng) {
    std::uint16_t* row = kc.data<std::uint16_t>() + t * nope;
    const std::int64_t exact_tile = rng.randint(0, tiles - 1);
    for (std::int64_t j = 0; j < tiles; ++j) {
      const bool zero = rng.uniform() < zero_frac;
      const double sigma = pow2(rng.randint(-3, 3));
      for (std::int64_t d = 0; d < tile; ++d)
        row[j * tile + d] = num::f64_to_bf16(zero ? 0.0 : gauss_outlier(rng, sigma, 0.01));
      if (!zero && j == exact_tile) {
        const double a = 448.0 * pow2(rng.randint(-6, 2));
        for (std::int64_t d = 0; d < tile; ++d)
          if (std::fabs(num::bf16_to_f64(row[j * tile + d])) > a) row[j * tile + d] = num::f64_to_bf16(0.5 * a);
        row[j * tile + rng.randint(0, tile - 1)] = num::f64_to_bf16(rng.uniform() < 0.5 ? a : -a);
      }
    }
  });
  for_rows(root, kK, T, threads, [&](std::int64_t t, Rng& rng) {
    for (std::int64_t r = 0; r < L::kRope; ++r) pe.data<std::uint16_t>()[t * L::kRope + r] = num::f64_to_bf16(rng.normal());
  });
  const auto perm = permutation(root.fork(kPerm), P * ps);
  Tensor slots(DType::i64, {T});
  const double pad = s.param("pad_frac", 0.1);
  for_rows(root, kPad, T, threads, [&](std::int64_t t, Rng& rng) {
    slots.data<std::int64_t>()[t] = rng.uniform() < pad ? -1 : perm[static_cast<std::size_t>(t)];
  });
  Tensor cache(DType::u8, {P, ps, 1, rec});
  poison_bytes(root, P * ps, rec, threads, cache.data<std::uint8_t>());
  c.inputs = {{"kv_c", kc}, {"k_pe", pe}, {"slot_mapping", slots}, {"kv_cache_in", cache}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"mla_kcache.shuffled_slots", "mla.kcache_store",
           "c = bf16 N(0, 2^U{-3..3}) per 128-dim tile with 1% outliers, zero_tile_frac of the tiles all zero, one tile per "
           "token with |amax| = 448*2^k exactly; k_pe bf16 N(0,1); slot_mapping a random permutation of the P*64 slots "
           "with pad_frac padded (-1); kv_cache_in random poison bytes; attr layout model1_fp8_584: 448 dims in 7 tiles of 64, "
           "584-byte cache. dims T, P; params pad_frac, zero_tile_frac",
           gen_mla_kcache}};
}

std::vector<GoldenSpec> goldens() {
  const char* st = "mla.kcache_store";
  const char* g = "mla_kcache.shuffled_slots";
  return {
      {.name = "mla_kcache_pow2", .stage = st, .generator = g, .seed = 601, .dims = {{"T", 48}, {"P", 1}},
       .attrs = {{"scale_fmt", S("pow2")}},
       .doc = "pow2 scales 2^ceil(log2(max(amax/448,1e-4))) (FlashMLA @HEAD, vLLM 2026-07+): zero tiles 2^-13, amax = 448*2^k ties"},
      {.name = "mla_kcache_ue8m0", .stage = st, .generator = g, .seed = 602, .dims = {{"T", 48}, {"P", 1}},
       .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "DeepSeek demo act_quant ue8m0 scales (eps before the multiply by fl32(1/448): zero tiles 2^-22)"},
      {.name = "mla_kcache_amax448_zero_tiles", .stage = st, .generator = g, .seed = 603, .dims = {{"T", 40}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.25}}, .attrs = {{"scale_fmt", S("amax448")}, {"scale_apply", S("mul_inv")}},
       .doc = "amax/448 by IEEE division without eps, codes x*fl32(1/s): zero tiles store scale 0 and NaN codes 0x7F"},
      {.name = "mla_kcache_fp32_mul_torch_cuda", .stage = st, .generator = g, .seed = 607, .dims = {{"T", 40}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.25}}, .attrs = {{"scale_fmt", S("fp32_mul")}, {"amax_eps", 0.0}},
       .doc = "a torch writer on CUDA (FlashMLA tests @1408756 quantize_k_cache: amax.float() / 448.0, then x / s): torch "
              "multiplies by fl32(1/448) (measured on H200: 0 of 1081215 amaxes differ), no floor: zero tiles scale 0 and "
              "NaN codes 0x7F"},
      {.name = "mla_kcache_bf16_mul_sglang", .stage = st, .generator = g, .seed = 608, .dims = {{"T", 40}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.2}}, .attrs = {{"scale_fmt", S("bf16_mul")}, {"amax_eps", 0.0}},
       .doc = "sglang _quantize_k_cache_slow: the max of a bf16 tile is bf16 and `/ 448.0` runs in fp32 as a multiply, rounded "
              "to bf16 (measured on H200), stored as fp32; codes x.float() / s, which may exceed 448 by up to 2^-8 and round "
              "to 448"},
      {.name = "mla_kcache_flt_min", .stage = st, .generator = g, .seed = 604, .dims = {{"T", 40}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.25}}, .attrs = {{"scale_fmt", S("flt_min")}},
       .poison = {{"kv_c", 3, -1, golden::kNaN}, {"kv_c", 5, 200, golden::kInf}},
       .doc = "max(amax/448, FLT_MIN) (vLLM 2026): zero tiles store FLT_MIN and zero codes; non-pow2 scales (B25 finding); "
              "NaN policy: a NaN token (NaN scales, 0x7F codes) and an inf in tile 1 of token 5 (scale inf)"},
      {.name = "mla_kcache_model1_pow2", .stage = st, .generator = g, .seed = 605, .dims = {{"T", 40}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.2}}, .attrs = {{"layout", S("model1_fp8_584")}, {"scale_fmt", S("pow2")}},
       .poison = {{"kv_c", 7, 100, golden::kNaN}},
       .doc = "DeepSeek-V4 MODEL1 cache (FlashMLA quantize_k_cache): 7 e8m0 tile scales per token in the block's scale "
              "records after the 576-byte token records, zero tiles 2^-13, amax = 448*2^k ties; a NaN in tile 1 of token 7 "
              "(scale byte 0xFF)"},
      {.name = "mla_kcache_model1_ue8m0", .stage = st, .generator = g, .seed = 606, .dims = {{"T", 30}, {"P", 1}},
       .params = {{"zero_tile_frac", 0.3}}, .attrs = {{"layout", S("model1_fp8_584")}, {"scale_fmt", S("ue8m0")}},
       .doc = "vLLM's V4 main store: amax clamped to 1e-4 before the fl32(1/448) multiply (zero tiles 2^-22, e8m0 105)"},
  };
}

}  // namespace dsa::mla::kcache_store
