// mla.kcache_store: selftest cases and mutants modelled on real bugs, each with the verdict it must get.
#include <cstring>

#include "stage/mutant_kit.hpp"
#include "stages/mla/kcache_store/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::mla::kcache_store {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;
using golden::S;
using L = layouts::MlaKCache;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {{.name = "mla_kcache", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 5,
           .dims = {{"T", 24}, {"P", 1}}, .params = {{"pad_frac", 0.25}}, .attrs = {{"scale_fmt", S("pow2")}},
           .doc = "shuffled slots, padded tokens, zero tiles"},
          {.name = "mla_kcache_torch_cuda", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 7,
           .dims = {{"T", 24}, {"P", 1}}, .params = {{"zero_tile_frac", 0.1}},
           .attrs = {{"scale_fmt", S("fp32_mul")}, {"amax_eps", 0.0}}, .doc = "torch on CUDA: fp32 scales fl32(amax * fl32(1/448))"},
          {.name = "mla_kcache_model1", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 6,
           .dims = {{"T", 24}, {"P", 1}}, .params = {{"pad_frac", 0.25}, {"zero_tile_frac", 0.2}},
           .attrs = {{"layout", S("model1_fp8_584")}, {"scale_fmt", S("pow2")}}, .doc = "MODEL1 cache: shuffled slots, padded tokens"},
          // kv records (layouts/kv_records.hpp): page 0 the null page, pages of 32 tokens
          {.name = "kv_v41_mxfp8", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 8,
           .model = {.page_size = 32}, .dims = {{"T", 20}, {"P", 2}}, .attrs = {{"layout", S("v41_mxfp8_528")}, {"page_size", I(32)}},
           .doc = "V4.1 window KV, MXFP8 page_segregated"},
          {.name = "kv_v41_mxfp8_fp32_rope", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 9,
           .model = {.page_size = 32}, .dims = {{"T", 20}, {"P", 2}}, .params = {{"k_pe_f32", 1.0}},
           .attrs = {{"layout", S("v41_mxfp8_528")}, {"page_size", I(32)}}, .doc = "V4.1 window KV from an f32 rotary output, the REF's bf16 source"},
          {.name = "kv_v41_nvfp4", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 10,
           .model = {.page_size = 32}, .dims = {{"T", 20}, {"P", 2}}, .attrs = {{"layout", S("v41_nvfp4_288")}, {"page_size", I(32)}},
           .doc = "V4.1 compressed KV, NVFP4 (REF rule) page_segregated"},
          {.name = "kv_sglang_368", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 11,
           .model = {.page_size = 32}, .dims = {{"T", 20}, {"P", 2}}, .attrs = {{"layout", S("sglang_mxfp4_368")}, {"page_size", I(32)}},
           .doc = "sglang's MXFP4 368-byte record"},
          {.name = "kv_flashmla_352", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 12,
           .model = {.page_size = 32}, .dims = {{"T", 20}, {"P", 2}}, .attrs = {{"layout", S("flashmla_nvfp4_352")}, {"page_size", I(32)}},
           .doc = "FlashMLA #18's NVFP4 352-byte record"},
          {.name = "kv_v41_idx", .stage = "mla.kcache_store", .generator = "mla_kcache.shuffled_slots", .seed = 13,
           .model = {.page_size = 128}, .dims = {{"T", 40}, {"P", 2}}, .attrs = {{"layout", S("v41_idx_mxfp4_68")}, {"page_size", I(128)}},
           .doc = "the V4.1 indexer K cache, MXFP4 68-byte records"}};
}

namespace {
// Applies f(record, slot) to every written record of the output.
template <class F>
void each_written(Case& c, F f) {
  Tensor& o = output(c, "kv_cache");
  const Tensor& sm = c.input("slot_mapping");
  for (std::int64_t i = 0; i < sm.numel(); ++i)
    if (sm.int_at(i) >= 0) f(o.data<std::uint8_t>() + sm.int_at(i) * L::kRecord, sm.int_at(i));
}
}  // namespace

std::vector<Mutant> mutants() {
  using B = RecordBug;
  auto rb = [](B bug) { return reference_bug(&cpu_record, bug); };
  return {
      {"kv_rope_fp32_source", "B49", "kv_v41_mxfp8_fp32_rope", V{Verdict::FAIL},
       "the V4.1 window record's RoPE dims quantized from the unrounded fp32 rotary output (vLLM's writers) where the dump "
       "declares the REF's bf16 source", rb(B::rope_fp32), "B49"},
      {"kv_e2m1_ties_down", "B50", "kv_v41_nvfp4", V{Verdict::FAIL}, "e2m1 ties rounded down (DeepGEMM's utility) where RNE is declared",
       rb(B::tie_flip), "B50"},
      {"kv_e2m1_zero_sign_cleared", "B51", "kv_v41_nvfp4", V{Verdict::FAIL},
       "negative values rounding to zero coded 0x0 (DeepGEMM's utility) where the sign is kept (0x8)", rb(B::zero_flip), "B51"},
      {"kv_e2m1_nibbles_swapped", "B52", "kv_sglang_368", V{Verdict::FAIL},
       "the nibbles of every code byte swapped (an AMD low-first instruction read as PTX's high-first)", rb(B::nibbles_swapped), "B52"},
      {"kv_codes_unrounded_scale", "B53", "kv_sglang_368", V{Verdict::FAIL},
       "codes divided by the unrounded amax/6 while the stored ue8m0 scale is rounded (up to 2x off)", rb(B::codes_unrounded_scale), "B53"},
      {"kv_multirow_scatter_offset", "B55", "kv_v41_mxfp8", V{Verdict::FAIL},
       "a multi-row scatter that adds the source row offset: token i lands at slot + i", rb(B::scatter_row_offset), "B55"},
      {"kv_record_order_swapped", "v41 §2.3", "kv_v41_nvfp4", V{Verdict::FAIL},
       "the V4.1 record written token_interleaved where the cache is page_segregated", rb(B::order_swapped), "v41 §2.3"},
      {"kv_idx_mxfp4_floor_1e4", "B54", "kv_v41_idx", V{Verdict::FAIL},
       "the MXFP4 amax floor 1e-4 (vLLM before #41015): tiny blocks get the scale 2^-15 and zero codes", rb(B::mx4_floor_1e4), "B54"},
      {"kv_352_scales_unpermuted", "v41 §2.4", "kv_flashmla_352", V{Verdict::FAIL},
       "the 352-byte record's scales in natural order (the kernel reads scale s at byte 8*(s&3)+(s>>2))", rb(B::scales_unpermuted),
       "v41 §2.4"},
      {"mla_kcache_nonpow2_scale", "B25", "mla_kcache", V{Verdict::FAIL},
       "writer stores amax/448 (fp32, not a power of two) where the cache contract is pow2",
       buggy([](Case& c) { set_attr(c, "scale_fmt", S("amax448")); })},
      {"mla_kcache_scale_tile_shifted", "v32 §6.3", "mla_kcache", V{Verdict::FAIL},
       "the 4 tile scales written one slot late (tile j's scale in field j+1 mod 4)",
       [](Case& c, const Expected&, std::uint64_t) {
         each_written(c, [](std::uint8_t* rec, std::int64_t) {
           std::uint8_t s[16];
           std::memcpy(s, rec + L::kScaleOff, 16);
           for (int j = 0; j < 4; ++j) std::memcpy(rec + L::kScaleOff + 4 * ((j + 1) % 4), s + 4 * j, 4);
         });
       }},
      {"mla_kcache_rope_dropped", "v32 §6.3", "mla_kcache", V{Verdict::FAIL}, "k_pe not written (the 128 rope bytes keep the old cache bytes)",
       [](Case& c, const Expected&, std::uint64_t) {
         const Tensor in = c.input("kv_cache_in");
         each_written(c, [&](std::uint8_t* rec, std::int64_t slot) {
           std::memcpy(rec + L::kRopeOff, in.data<std::uint8_t>() + slot * L::kRecord + L::kRopeOff, 2 * L::kRope);
         });
       }},
      {"mla_kcache_padded_token_written", "B12", "mla_kcache", V{Verdict::FAIL},
       "padded tokens (slot -1) written to the lowest slots no other token stores into (slot 0 first)",
       buggy([](Case& c) {
         edit_input(c, "slot_mapping", write_padded_tokens);
       })},
      {"mla_kcache_model1_aos", "v4 §9", "mla_kcache_model1", V{Verdict::FAIL},
       "MODEL1 written as 584-byte AoS records (codes, rope, then the token's 8 scale bytes) instead of the per-block "
       "split (all 576-byte token records, then the scale records)",
       [](Case& c, const Expected&, std::uint64_t) {
         Tensor& o = output(c, "kv_cache");
         const std::int64_t ps = o.dim(1);
         for (std::int64_t p0 = 0; p0 < o.dim(0); ++p0)
           layouts::model1_split_to_aos(o.data<std::uint8_t>() + p0 * ps * layouts::Model1KCache::kRecord, ps);
       }},
      {"mla_kcache_torch_cpu_division", "v32 §6.3", "mla_kcache_torch_cuda", V{Verdict::FAIL},
       "the scale computed by a true division fl32(amax / 448) (torch on the CPU, CUDA C) where the dump declares torch on "
       "CUDA's fl32(amax * fl32(1/448)): 1 ulp apart on ~half of the amaxes",
       buggy([](Case& c) { set_attr(c, "scale_fmt", S("fp32_div")); })},
      {"mla_kcache_scale_bf16_rounded", "v32 §6.3", "mla_kcache_torch_cuda", V{Verdict::FAIL},
       "the scale kept in a bf16 tensor (sglang's slow path) where the dump declares fp32 scales",
       buggy([](Case& c) { set_attr(c, "scale_fmt", S("bf16_mul")); })},
      {"mla_kcache_model1_ue8m0_rule", "v4 §10", "mla_kcache_model1", V{Verdict::FAIL},
       "vLLM's scale rule (amax clamped before the 1/448 multiply) where the dump pins FlashMLA's pow2 rule",
       buggy([](Case& c) { set_attr(c, "scale_fmt", S("ue8m0")); })},
  };
}

}  // namespace dsa::mla::kcache_store
