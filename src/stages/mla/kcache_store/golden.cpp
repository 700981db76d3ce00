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

void gen_kv_record(const GoldenSpec& s, const layouts::RecordFormat& f, std::uint64_t seed, int threads, Case& c);

// c: per token and tile, N(0, 2^U{-3..3}) with outliers; a fraction of tiles all zero (zero-tile scale rules) and one
// tile per token holding an exact power-of-two amax 448 * 2^e (ties of the ceil(log2) rules).
void gen_mla_kcache(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 48), P = s.dim("P", 1), ps = s.model.page_size;
  if (T > P * ps) throw std::invalid_argument(s.name + ": T must be <= P * page_size");
  auto lay = s.attrs.find("layout");
  if (lay != s.attrs.end())
    if (const layouts::RecordFormat* f = layouts::find_record(std::get<std::string>(lay->second))) return gen_kv_record(s, *f, seed, threads, c);
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

// One adversarial block of n values (a codec scale block of a kv record) into v: its kind drawn per block.
//   normal   N(0, 2^U{-3..3}) with 1 % outliers
//   ties     the scale made exact (amax = top * 2^k, top = 448 for MXFP8, 6 for the fp4 codecs, so every rule's scale is
//            2^k or 2^(k-8)), the other values exact rounding midpoints of the codes: e2m1 .25 .75 1.25 1.75 2.5 3.5 5
//            (and negatives); e4m3 1 + 1/16 + j/8 (a 3-bit mantissa's midpoints) times powers of two
//   zero     all 0, some -0.0
//   tiny     below every floor (NVFP4 6*2^-9, MXFP8 1e-4 * 448, MXFP4 6*2^-126 (bf16 subnormals))
//   huge     amax 2^12..2^13 (NVFP4 scales past 448: NaN without saturation, 448 with it)
//   negzero  small negatives that round to a zero code next to a large value, and -0.0 (the sign of zero rules)
void record_block(Rng& rng, bool mxfp8, bool mxfp4, int n, double* v) {
  const double u = rng.uniform();
  const double top = mxfp8 ? 448.0 : 6.0;
  if (u < 0.35) {
    const double sigma = pow2(rng.randint(-3, 3));
    for (int i = 0; i < n; ++i) v[i] = gauss_outlier(rng, sigma, 0.01);
  } else if (u < 0.6) {
    const std::int64_t k = rng.randint(-6, 3);
    static const double e2m1_mid[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0};
    for (int i = 0; i < n; ++i) {
      double m;
      if (mxfp8) m = (1.0 + 1.0 / 16 + static_cast<double>(rng.randint(0, 7)) / 8) * pow2(rng.randint(-5, 8));
      else m = e2m1_mid[rng.randint(0, 6)];
      v[i] = (rng.uniform() < 0.5 ? -m : m) * pow2(k);
    }
    v[rng.randint(0, n - 1)] = (rng.uniform() < 0.5 ? -top : top) * pow2(k);
  } else if (u < 0.68) {
    for (int i = 0; i < n; ++i) v[i] = rng.uniform() < 0.3 ? -0.0 : 0.0;
  } else if (u < 0.78) {  // MXFP4: below 6*2^-126, or between it and vLLM's old floor 1e-4 (B54)
    const double lim = mxfp4 ? (rng.uniform() < 0.5 ? pow2(-127) : 1e-6) : mxfp8 ? 0.02 : pow2(-10);
    for (int i = 0; i < n; ++i) v[i] = (rng.uniform() * 2 - 1) * lim;
  } else if (u < 0.86) {
    const double a = pow2(rng.randint(12, 13));
    for (int i = 0; i < n; ++i) v[i] = (rng.uniform() * 2 - 1) * a;
    v[rng.randint(0, n - 1)] = a * 1.5;
  } else {
    const double big = pow2(rng.randint(-2, 4));
    for (int i = 0; i < n; ++i) v[i] = rng.uniform() < 0.25 ? -0.0 : -big * rng.uniform() / 48;
    v[rng.randint(0, n - 1)] = big;
  }
}

// The kv record layouts: [kv_c | k_pe] rows of adversarial blocks (record_block), k_pe f32 with param k_pe_f32 = 1 (the
// unrounded rotary output: values not representable in bf16); slots a random permutation of the pages after page 0
// (the null page, never written), pad_frac padded; kv_cache_in poison bytes.
void gen_kv_record(const GoldenSpec& s, const layouts::RecordFormat& f, std::uint64_t seed, int threads, Case& c) {
  const Rng root(seed);
  const std::int64_t T = s.dim("T", 28), P = s.dim("P", 2), ps = s.model.page_size;
  if (P < 2 || T > (P - 1) * ps) throw std::invalid_argument(s.name + ": needs P >= 2 and T <= (P - 1) * page_size (page 0 is the null page)");
  const int dim = f.dim(), blk = f.block();
  const bool mx8 = !f.fp4(), mx4 = f.codec == layouts::RecCodec::mxfp4;
  const bool pe32 = s.param("k_pe_f32", 0.0) != 0.0;
  Tensor kc(DType::bf16, {T, f.nope}), pe(pe32 ? DType::f32 : DType::bf16, {T, f.rope});
  for_rows(root, kKv, T, threads, [&](std::int64_t t, Rng& rng) {
    std::vector<double> row(static_cast<std::size_t>(dim));
    for (int b = 0; b + blk <= dim; b += blk) record_block(rng, mx8, mx4, blk, row.data() + b);
    if (f.rope_store != layouts::RopeStore::quantized)  // RoPE stored beside the codes: N(0, 1), some beyond e4m3's 448
      for (int d = f.nope; d < dim; ++d) row[static_cast<std::size_t>(d)] = rng.uniform() < 0.05 ? 300.0 + 400.0 * rng.uniform() : rng.normal();
    for (int d = 0; d < f.nope; ++d) kc.data<std::uint16_t>()[t * f.nope + d] = num::f64_to_bf16(row[static_cast<std::size_t>(d)]);
    for (int d = 0; d < f.rope; ++d) {
      const double v = row[static_cast<std::size_t>(f.nope + d)];
      if (pe32) pe.data<float>()[t * f.rope + d] = static_cast<float>(v * (1.0 + rng.normal() * 0x1p-10));
      else pe.data<std::uint16_t>()[t * f.rope + d] = num::f64_to_bf16(v);
    }
  });
  const auto perm = permutation(root.fork(kPerm), (P - 1) * ps);
  Tensor slots(DType::i64, {T});
  const double pad = s.param("pad_frac", 0.1);
  for_rows(root, kPad, T, threads, [&](std::int64_t t, Rng& rng) {
    slots.data<std::int64_t>()[t] = rng.uniform() < pad ? -1 : ps + perm[static_cast<std::size_t>(t)];
  });
  Tensor cache(DType::u8, {P, ps, 1, f.record_bytes()});
  poison_bytes(root, P * ps, f.record_bytes(), threads, cache.data<std::uint8_t>());
  c.inputs = {{"kv_c", kc}, {"k_pe", pe}, {"slot_mapping", slots}, {"kv_cache_in", cache}};
}

}  // namespace

std::vector<Generator> generators() {
  return {{"mla_kcache.shuffled_slots", "mla.kcache_store",
           "c = bf16 N(0, 2^U{-3..3}) per 128-dim tile with 1% outliers, zero_tile_frac of the tiles all zero, one tile per "
           "token with |amax| = 448*2^k exactly; k_pe bf16 N(0,1); slot_mapping a random permutation of the P*64 slots "
           "with pad_frac padded (-1); kv_cache_in random poison bytes; attr layout model1_fp8_584: 448 dims in 7 tiles of 64, "
           "584-byte cache; attr layout = a kv record (v41_mxfp8_528, ...): [kv_c | k_pe] rows of adversarial codec blocks (exact "
           "scales with rounding-midpoint codes, zero and -0.0 blocks, blocks below every amax floor, huge blocks past "
           "448 * 6, small negatives rounding to zero next to a large value), k_pe f32 with param k_pe_f32 = 1, page 0 the "
           "null page (never a slot). dims T, P; params pad_frac, zero_tile_frac, k_pe_f32",
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
      // kv records (layouts/kv_records.hpp): pages of 32 tokens, page 0 the null page, poisoned cache bytes as canaries
      {.name = "kv_v41_mxfp8_528", .stage = st, .generator = g, .seed = 611, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"page_size", I(32)}},
       .doc = "V4.1 window KV (FlashMLA V41), REF / vLLM MXFP8 rule, page_segregated: exact 448*2^k scales with e4m3 midpoints, "
              "blocks below the 1e-4 floor, zero and -0.0 blocks"},
      {.name = "kv_v41_mxfp8_528_flashmla_gfx950", .stage = st, .generator = g, .seed = 612, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"page_size", I(32)}, {"mxfp8_rule", S("flashmla")}, {"scale_byte_max", I(254)}, {"record_order", S("token_interleaved")}},
       .poison = {{"kv_c", 2, 40, golden::kInf}, {"kv_c", 5, 100, golden::kNaN}},
       .doc = "FlashMLA's test floor on the scale (not amax), scale bytes capped at 254 (gfx950), token_interleaved: an inf "
              "(e = 128: byte 254, not 255) and a NaN block (0xFF)"},
      {.name = "kv_v41_mxfp8_528_fp32_rope", .stage = st, .generator = g, .seed = 613, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}}, .params = {{"k_pe_f32", 1.0}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"page_size", I(32)}, {"quant_source", S("fp32")}},
       .doc = "vLLM's V4.1 writer: the RoPE dims quantized from the unrounded f32 rotary output (B49 is the same cache with "
              "quant_source bf16)"},
      {.name = "kv_v41_nvfp4_288", .stage = st, .generator = g, .seed = 614, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("v41_nvfp4_288")}, {"page_size", I(32)}},
       .doc = "V4.1 compressed KV (FlashMLA V41_FP4), REF NVFP4 rule (amax floor 6*2^-9, no saturation: blocks past 2784 "
              "store the NaN scale), e2m1 ties at .25 .75 1.75 3.5 to even, -0.0 and small negatives 0x8"},
      {.name = "kv_v41_nvfp4_288_vllm_interleaved", .stage = st, .generator = g, .seed = 615, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("v41_nvfp4_288")}, {"page_size", I(32)}, {"nvfp4_rule", S("vllm")}, {"record_order", S("token_interleaved")}},
       .doc = "vLLM's V4.1 NVFP4 rule (amax * fl32(1/6), scale clamped to [2^-9, 448]), token_interleaved records"},
      {.name = "kv_v41_nvfp4_288_flashmla_nan", .stage = st, .generator = g, .seed = 616, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}}, .attrs = {{"layout", S("v41_nvfp4_288")}, {"page_size", I(32)}, {"nvfp4_rule", S("flashmla")}},
       .poison = {{"kv_c", 3, 17, golden::kInf}, {"kv_c", 6, 300, golden::kNaN}},
       .doc = "FlashMLA's test: NaN or inf in a 16-block gives the NaN scale 0x7F and zero codes"},
      {.name = "kv_v41_nvfp4_288_deepgemm_util", .stage = st, .generator = g, .seed = 617, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("v41_nvfp4_288")}, {"page_size", I(32)}, {"e2m1_tie", S("half_down")}, {"e2m1_zero", S("clear")}},
       .doc = "DeepGEMM's utility codec: e2m1 ties rounded down, zero codes 0x0 (B50 / B51 are these against an RNE dump)"},
      {.name = "kv_sglang_mxfp4_368", .stage = st, .generator = g, .seed = 618, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("sglang_mxfp4_368")}, {"page_size", I(32)}},
       .doc = "sglang's SM90 MXFP4 record: exponent round(log2(amax/6)) (|x|/s up to 8.5 saturates to 6), bf16 subnormal "
              "blocks at the byte 0 clamp, pad bytes never written (they keep the poison)"},
      {.name = "kv_flashmla_nvfp4_352", .stage = st, .generator = g, .seed = 619, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("flashmla_nvfp4_352")}, {"page_size", I(32)}},
       .doc = "FlashMLA #18's test: scale rounded up to the next e4m3 (never past 448), -0.0 coded 0x0, scales 4x8-interleaved, "
              "unscaled e4m3 RoPE without saturation (values past 464: NaN)"},
      {.name = "kv_flashmla_nvfp4_352_vllm", .stage = st, .generator = g, .seed = 620, .model = {.page_size = 32},
       .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("flashmla_nvfp4_352")}, {"page_size", I(32)}, {"nvfp4_rule", S("vllm352")}, {"e2m1_zero", S("keep")},
                 {"e2m1_nan", S("max")}, {"rope_cast", S("e4m3_sat")}},
       .poison = {{"kv_c", 4, 33, golden::kNaN}},
       .doc = "vLLM's nvfp4_ds_mla writer: amax skips NaN (fmaxf), saturating casts, codes x * fl32(1/s); a NaN element coded "
              "by e2m1_nan max"},
      {.name = "kv_nvfp4_384", .stage = st, .generator = g, .seed = 621, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("nvfp4_384")}, {"page_size", I(32)}},
       .doc = "FlashInfer's sparse-MLA nvfp4 cache (sglang V4 on SM120): per page the 352-byte data rows then the 32-byte scale "
              "rows, no amax floor (scale 0: zero codes), saturating scales, codes x * fl32(1/s)"},
      {.name = "kv_v41_idx_mxfp4_68", .stage = st, .generator = g, .seed = 623, .model = {.page_size = 128},
       .dims = {{"T", 48}, {"P", 2}}, .attrs = {{"layout", S("v41_idx_mxfp4_68")}, {"page_size", I(128)}},
       .doc = "the V4.1 indexer K cache (vLLM indexer_k_store, 68-byte MXFP4 records in 128-token pages): ceil exponent "
              "with the 6*2^-126 floor (blocks between it and 1e-4: B54's difference), RoPE dims quantized too"},
      {.name = "kv_v41_idx_mxfp4_68_floor_1e4", .stage = st, .generator = g, .seed = 624, .model = {.page_size = 128},
       .dims = {{"T", 32}, {"P", 2}},
       .attrs = {{"layout", S("v41_idx_mxfp4_68")}, {"page_size", I(128)}, {"mxfp4_rule", S("ref_floor_1e4")}},
       .doc = "vLLM's MXFP4 indexer K store before #41015: the amax floor 1e-4 (blocks below it: scale byte 112, zero codes)"},
      {.name = "kv_v41_idx_fp8_132", .stage = st, .generator = g, .seed = 625, .model = {.page_size = 128},
       .dims = {{"T", 40}, {"P", 2}}, .attrs = {{"layout", S("v41_idx_fp8_132")}, {"page_size", I(128)}},
       .poison = {{"kv_c", 3, 5, golden::kNaN}, {"k_pe", 4, 60, golden::kInf}},
       .doc = "the V4.1 indexer K cache's FP8 option: per 128-token page the 128 e4m3 codes, then one fp32 2^e per token "
              "(the MXFP8 rule over all 128 dims, amax floor 1e-4 on amax); a NaN token: NaN scale and 0x7F codes, an inf "
              "one: +inf scale"},
      {.name = "kv_nvfp4_432_v4", .stage = st, .generator = g, .seed = 626, .model = {.page_size = 16}, .dims = {{"T", 14}, {"P", 2}},
       .attrs = {{"layout", S("nvfp4_432_v4")}, {"page_size", I(16)}},
       .doc = "the 432-byte record's DeepSeek-V4 writer: all 512 dims in e2m1 (the RoPE dims 448..511 from their bf16 values, "
              "scales 28..31) and a bf16 copy of the RoPE dims at byte 304; amax * fl32(1/6), no floor, 16 zero pad bytes"},
      {.name = "kv_nvfp4_432", .stage = st, .generator = g, .seed = 622, .model = {.page_size = 32}, .dims = {{"T", 24}, {"P", 2}},
       .attrs = {{"layout", S("nvfp4_432")}, {"page_size", I(32)}},
       .doc = "local-inference-lab vLLM's 576-d NVFP4 record: amax * fl32(1/6), no floor, saturating, 16 zero pad bytes"},
  };
}

}  // namespace dsa::mla::kcache_store
