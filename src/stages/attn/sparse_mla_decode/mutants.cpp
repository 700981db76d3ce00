// attn.sparse_mla_decode: selftest cases and mutants modelled on real bugs (v32 spec §6.2/§6.3, real_bugs_2026
// B25, B32-B35), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"
#include "profiles/profiles.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/attn/sparse_mla_decode/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::sparse_mla_decode {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::S;
using L = layouts::MlaKCache;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "attn.sparse_mla_decode";
  const char* g = "sparse_decode.random";
  const AttrValue mla_scale{0.1352337788608801};
  return {
      {.name = "mla_decode", .stage = st, .generator = g, .seed = 21, .dims = {{"B", 2}, {"S", 2}, {"H", 16}, {"P", 3}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"lonely_every", 4}, {"poison_unused", 1}}, .attrs = {{"softmax_scale", mla_scale}},
       .doc = "MTP decode, poisoned unused records, a lonely row"},
      {.name = "mla_decode_nonpow2", .stage = st, .generator = g, .seed = 22, .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 3}, {"K", 128}},
       .params = {{"invalid_frac", 0.05}, {"writer", 1}, {"sink", 2.0}}, .attrs = {{"softmax_scale", mla_scale}},
       .doc = "amax/448 scales (bf16-rounded by the kernel), sinks"},
      {.name = "mla_decode_model1", .stage = st, .generator = g, .seed = 23,
       .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 2}, {"K", 64}, {"XP", 2}, {"xps", 16}, {"XK", 64}},
       .params = {{"invalid_frac", 0.1}, {"topk_length", 1}, {"poison_unused", 1}, {"sink", 2.0}},
       .attrs = {{"layout", S("model1_fp8_584")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "MODEL1 with an extra scope, topk_length / extra_topk_length, NaN records behind unselected lanes"},
      {.name = "mla_decode_masked", .stage = st, .generator = g, .seed = 24, .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 3}, {"K", 128}},
       .params = {{"invalid_frac", 0.4}}, .attrs = {{"softmax_scale", AttrValue{0.015625}}},
       .doc = "many -1 lanes over real records (slot 0 included) and flat softmax weights (scale 2^-6): a kernel reading -1 "
              "as slot 0 moves every row"},
      {.name = "mla_decode_v41", .stage = st, .generator = g, .seed = 25,
       .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 2}, {"ps", 32}, {"K", 64}, {"XP", 2}, {"xps", 32}, {"XK", 64}},
       .params = {{"invalid_frac", 0.1}, {"poison_unused", 1}},
       .attrs = {{"layout", S("v41_mxfp8_528")}, {"extra_layout", S("v41_nvfp4_288")}, {"softmax_scale", AttrValue{0.04419417382415922}}},
       .doc = "DeepSeek-V4.1: the (V41, V41_FP4) pair, page_segregated"},
      {.name = "mla_decode_352", .stage = st, .generator = g, .seed = 26, .dims = {{"B", 2}, {"S", 1}, {"H", 16}, {"P", 2}, {"K", 64}},
       .params = {{"invalid_frac", 0.1}}, .attrs = {{"layout", S("flashmla_nvfp4_352")}, {"softmax_scale", mla_scale}},
       .doc = "the 352-byte NVFP4 record (V3.2, d_qk 576)"},
      // flashmla-sm90 claims: the plausible output is the decode emulation. The SM counts make the schedule split the
      // requests over CTAs (32 SMs, s_q 2: 16 parts of 2 blocks; 16 SMs: 16 parts of 1 block), so the combine runs too.
      {.name = "mla_decode_flashmla", .stage = st, .generator = g, .seed = 27, .dims = {{"B", 3}, {"S", 2}, {"H", 64}, {"P", 4}, {"K", 192}},
       .params = {{"invalid_frac", 0.1}, {"lonely_every", 5}, {"sink", 2.0}},
       .attrs = {{"softmax_scale", mla_scale}, {"num_sms", AttrValue{std::int64_t{32}}}, {"kernel", S(profiles::flashmla_sm90().name.c_str())}},
       .doc = "a V3.2 decode whose kernel claims flashmla-sm90 on a 32-SM schedule (split requests, the combine): its output "
              "is the decode emulation, bit for bit"},
      {.name = "mla_decode_flashmla_model1", .stage = st, .generator = g, .seed = 28,
       .dims = {{"B", 2}, {"S", 1}, {"H", 64}, {"P", 2}, {"K", 128}, {"XP", 2}, {"xps", 32}, {"XK", 64}},
       .params = {{"invalid_frac", 0.1}, {"topk_length", 1}, {"sink", 2.0}},
       .attrs = {{"layout", S("model1_fp8_584")}, {"softmax_scale", AttrValue{0.04419417382415922}}, {"num_sms", AttrValue{std::int64_t{16}}},
                 {"kernel", S(profiles::flashmla_sm90().name.c_str())}},
       .doc = "MODEL1 with the extra scope and topk_length, kernel flashmla-sm90 on a 16-SM schedule"},
  };
}

void drop_extra_scope(Case& c) {
  c.inputs.erase("extra_k_cache");
  c.inputs.erase("extra_indices_in_kvcache");
  c.inputs.erase("extra_topk_length");
}

void scales_352_unpermuted(Tensor& t) {
  const layouts::RecordFormat& f = *layouts::find_record("flashmla_nvfp4_352");
  const int rb = f.record_bytes(), off = f.region_start(f.region_index(layouts::RegionKind::scales));
  std::uint8_t* b = t.data<std::uint8_t>();
  for (std::int64_t r = 0; r < t.numel() / rb; ++r) {
    std::uint8_t sc[32], fixed[32];
    std::memcpy(sc, b + r * rb + off, 32);
    for (int s2 = 0; s2 < f.nscales(); ++s2) fixed[f.scale_pos(s2)] = sc[s2];
    std::memcpy(b + r * rb + off, fixed, 32);
  }
}

void model1_read_as_aos(Tensor& t) {
  const std::int64_t ps = t.dim(1);
  for (std::int64_t p0 = 0; p0 < t.dim(0); ++p0) layouts::model1_aos_to_split(t.data<std::uint8_t>() + p0 * ps * layouts::Model1KCache::kRecord, ps);
}

std::vector<Mutant> mutants() {
  return {
      {"mla_decode_minus1_as_token0", "B34", "mla_decode", V{Verdict::FAIL, Verdict::NONFINITE},
       "-1 indices read as slot 0 (which holds NaN bytes) instead of masked",
       buggy([](Case& c) {
         edit_input(c, "indices", [](Tensor& t) { replace_padding(t, 0); });
       })},
      {"mla_decode_default_scale", "v32 §6.2", "mla_decode", V{Verdict::FAIL},
       "softmax_scale left at FlashMLA's default 576^-0.5 where V3.2 passes the MLA scale",
       buggy([](Case& c) { set_attr(c, "softmax_scale", AttrValue{0.041666666666666664}); }), "v32 §6.2 softmax_scale"},
      {"mla_decode_scale_tile_shifted", "v32 §6.3", "mla_decode", V{Verdict::FAIL, Verdict::NONFINITE},
       "tile j dequantized with the scale of tile j+1 mod 4",
       buggy([](Case& c) {
         edit_input(c, "k_cache", [](Tensor& t) {
           for (std::int64_t r = 0; r < t.numel() / L::kRecord; ++r) {
             std::uint8_t* rec = t.data<std::uint8_t>() + r * L::kRecord + L::kScaleOff;
             std::uint8_t s[16];
             std::memcpy(s, rec, 16);
             for (int j = 0; j < 4; ++j) std::memcpy(rec + 4 * j, s + 4 * ((j + 1) % 4), 4);
           }
         });
       })},
      {"mla_decode_rope_dropped", "v32 §7", "mla_decode", V{Verdict::FAIL}, "k_pe of the cache left out of q.k",
       buggy([](Case& c) {
         edit_input(c, "q", [](Tensor& t) {
           for (std::int64_t x = 0; x < t.numel(); ++x)
             if (x % 576 >= 512) t.data<std::uint16_t>()[x] = 0;
         });
       }),
       "v32 §7 RoPE"},
      {"mla_decode_fp32_scale_read", "B25", "mla_decode_nonpow2", V{Verdict::FAIL},
       "non-pow2 scales read as fp32 where the SM90 kernel rounds them to bf16 (the tests' dequantize instead of the kernel's)",
       buggy([](Case& c) { set_attr(c, "dequant", S("f32_scale")); })},
      {"mla_decode_sink_ignored", "B35", "mla_decode_nonpow2", V{Verdict::FAIL}, "attn_sink accepted but not applied",
       buggy([](Case& c) { c.inputs.erase("attn_sink"); }), "B35 sink"},
      {"mla_decode_sink_in_numerator", "B35", "mla_decode_nonpow2", V{Verdict::FAIL},
       "the sink treated as a key with an all-ones value (e^sink added to the numerator as well as to L)",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "out");
         const Tensor &ref = reft(E, "out").value, &lse = reft(E, "lse").value;  // out [B,S,H,512], lse [B,H,S]
         const float* sink = c.input("attn_sink").data<float>();
         const std::int64_t S = ref.dim(1), H = ref.dim(2), dv = ref.dim(3);
         for (std::int64_t x = 0; x < ref.numel(); ++x) {
           const std::int64_t row = x / (H * dv), h = x / dv % H;
           const double l = lse.value((row / S * H + h) * S + row % S);
           if (!std::isfinite(l)) continue;
           const double w = num::det_exp(sink[h] - l);
           o.data<std::uint16_t>()[x] = num::f64_to_bf16(ref.value(x) + w / (1.0 + w));
         }
       },
       "B35 sink numerator"},
      {"mla_decode_masked_minus1_as_token0", "B34", "mla_decode_masked", V{Verdict::FAIL},
       "-1 indices read as slot 0 (a real record here) instead of masked",
       buggy([](Case& c) {
         edit_input(c, "indices", [](Tensor& t) { replace_padding(t, 0); });
       }),
       "B34"},
      // Shifts every element's bound still covers (the per-element worst case is wide where softmax weights cancel):
      // the systematic-error gate must catch them.
      {"mla_decode_out_scaled_1pct", "v32 §7 systematic", "mla_decode", V{Verdict::FAIL},
       "out 1 % too large (a constant factor off): within every element's bound, caught by the systematic gate",
       [](Case& c, const Expected&, std::uint64_t) { scale_bf16(output(c, "out"), 1.01); }},
      {"mla_decode_out_scaled_half_pct", "v32 §7 systematic", "mla_decode", V{Verdict::FAIL},
       "out 0.5 % too small", [](Case& c, const Expected&, std::uint64_t) { scale_bf16(output(c, "out"), 0.995); }},
      {"mla_decode_lse_offset", "v32 §7 systematic", "mla_decode", V{Verdict::FAIL},
       "lse 0.005 too large (a constant added to the log-sum-exp) on an otherwise exact lse (real lse errors are ~1e-6; "
       "the selftest's plausible noise on 64 values would hide a 0.005 offset)",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& l = output(c, "lse");
         const Tensor& ref = E.find("lse")->value;
         for (std::int64_t i = 0; i < l.numel(); ++i)
           if (std::isfinite(ref.data<float>()[i])) l.data<float>()[i] = static_cast<float>(ref.data<float>()[i] + 0.005);
       }},
      {"mla_decode_lse_base2", "B35", "mla_decode", V{Verdict::FAIL}, "lse returned in log2 units (x log2 e)",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& l = output(c, "lse");
         for (std::int64_t i = 0; i < l.numel(); ++i)
           if (std::isfinite(l.data<float>()[i])) l.data<float>()[i] = static_cast<float>(l.data<float>()[i] * 1.4426950408889634);
       },
       "B35 lse base"},
      {"mla_decode_model1_extra_ignored", "v4 §9", "mla_decode_model1", V{Verdict::FAIL}, "the extra KV scope ignored",
       buggy(drop_extra_scope), "v4 §9 extra scope ignored"},
      {"mla_decode_model1_extra_topk_length_ignored", "v4 §9", "mla_decode_model1", V{Verdict::FAIL, Verdict::NONFINITE},
       "extra_topk_length ignored: every extra index counts (NaN records behind the lanes)",
       buggy([](Case& c) { c.inputs.erase("extra_topk_length"); })},
      {"mla_decode_model1_read_as_aos", "v4 §9", "mla_decode_model1", V{Verdict::FAIL, Verdict::NONFINITE},
       "the MODEL1 cache read as 584-byte AoS token records instead of the per-block split",
       // No diagnosis: the misread decodes scale bytes from code bytes, whose keys overflow: the output is NaN
       // everywhere, which every misread hypothesis explains equally (a NaN match alone names no bug).
       buggy([](Case& c) {
         for (const char* n : {"k_cache", "extra_k_cache"}) edit_input(c, n, model1_read_as_aos);
       })},
      {"mla_decode_model1_v32_values", "v4 §9", "mla_decode_model1", V{Verdict::FAIL},
       "values without the 64 RoPE dims (V3.2's V = the latent part): rope dims of out 0",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "out");
         for (std::int64_t x = 0; x < o.numel(); ++x)
           if (x % 512 >= 448) o.data<std::uint16_t>()[x] = 0;
       }},
      {"mla_decode_v41_read_as_v32_no_rope", "B56", "mla_decode_v41", V{Verdict::FAIL, Verdict::NONFINITE},
       "the 528-byte V41 rows decoded as the sgl-project fork's V3.2-no-RoPE record (512 e4m3 codes + 4 fp32 scales)",
       reference_with<Params>(
           [](Params& p) {
             if (!p.rec.f || p.rec.f->name != std::string("v41_mxfp8_528")) throw std::invalid_argument("B56 needs a v41_mxfp8_528 cache");
             p.misread_v32_no_rope = true;
           },
           [](const Case& c, const Params& p) { return run(c, p, RefOptions{}, Backend::cpu); })},  // no diagnosis: NaN everywhere, as the AoS misread
      {"mla_decode_v41_order_swapped", "v41 §2.3", "mla_decode_v41", V{Verdict::FAIL, Verdict::NONFINITE},
       "page_segregated V41 / V41_FP4 caches read as per-token interleaved records",
       buggy([](Case& c) { set_attr(c, "record_order", S("token_interleaved")); })},  // no diagnosis: NaN everywhere
      {"mla_decode_v41_extra_ignored", "v41 §2.3", "mla_decode_v41", V{Verdict::FAIL}, "the V41_FP4 extra scope ignored",
       buggy(drop_extra_scope), "v4 §9 extra scope ignored"},
      {"mla_decode_352_scales_unpermuted", "v41 §2.4", "mla_decode_352", V{Verdict::FAIL, Verdict::NONFINITE},
       "the 352-byte record's scales read in natural order (scale s at byte s, not 8*(s&3)+(s>>2))",
       buggy([](Case& c) {
         if (!c.has_attr("layout") || c.attr_str("layout") != "flashmla_nvfp4_352") throw std::invalid_argument("needs the 352-byte record");
         edit_input(c, "k_cache", scales_352_unpermuted);
       }),
       "v41 §2.4 352 scale order"},
      {"mla_decode_lonely_lse_neg_inf", "B35", "mla_decode", V{Verdict::NONFINITE},
       "rows without a valid index return lse -inf (the 2025 prefill convention) instead of +inf",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& l = output(c, "lse");
         for (std::int64_t i = 0; i < l.numel(); ++i)
           if (std::isinf(l.data<float>()[i])) l.data<float>()[i] = -std::numeric_limits<float>::infinity();
       }},
      // flashmla-sm90: what the bound cannot see (the plausible output is the emulation). One out element one bf16 ulp
      // off (in a combined request), one lse 1e-6 off, an exact (not FlashMLA) output: each must FAIL.
      {"flashmla_decode_out_one_ulp", "#39", "mla_decode_flashmla", V{Verdict::FAIL},
       "kernel claims flashmla-sm90, one out element one bf16 ulp from what FlashMLA computes",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         plausible_outputs(c, E, seed);
         Tensor& o = output(c, "out");
         o.data<std::uint16_t>()[o.numel() / 3 + 7] ^= 1;
       }},
      {"flashmla_decode_lse_1e-6", "#39", "mla_decode_flashmla", V{Verdict::FAIL},
       "kernel claims flashmla-sm90, one lse value 1e-6 off",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         plausible_outputs(c, E, seed);
         for (float& x : output(c, "lse").span<float>())
           if (std::isfinite(x)) {
             x += 1e-6f;
             break;
           }
       }},
      {"flashmla_decode_exact_not_kernel", "#39", "mla_decode_flashmla_model1", V{Verdict::FAIL},
       "kernel claims flashmla-sm90 but the output is another correct kernel's (the exact value perturbed inside the bound)",
       [](Case& c, const Expected& E, std::uint64_t seed) { other_kernel_outputs(c, E, seed + 1); }},
  };
}

}  // namespace dsa::attn::sparse_mla_decode
