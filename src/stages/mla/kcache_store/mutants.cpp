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
           .attrs = {{"layout", S("model1_fp8_584")}, {"scale_fmt", S("pow2")}}, .doc = "MODEL1 cache: shuffled slots, padded tokens"}};
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
  return {
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
