// attn.sparse_mla_prefill: selftest cases and mutants modelled on real bugs (v32 spec §6.1, real_bugs_2026 B32-B35),
// each with the verdict it must get.
#include <cmath>

#include "numerics/det_math.hpp"
#include "numerics/formats.hpp"
#include "profiles/profiles.hpp"
#include "stage/mutant_kit.hpp"
#include "stages/attn/sparse_mla_prefill/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::sparse_mla_prefill {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "attn.sparse_mla_prefill";
  const char* g = "sparse_prefill.random";
  return {
      {.name = "mla_prefill", .stage = st, .generator = g, .seed = 11, .dims = {{"S", 4}, {"H", 16}, {"N", 160}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"oob_frac", 0.05}, {"lonely_every", 4}, {"leading_invalid", 1}},
       .attrs = {{"softmax_scale", 0.1352337788608801}}, .doc = "invalid -1 and >= s_kv indices, a lonely row, leading -1 chunks"},
      {.name = "mla_prefill_sink", .stage = st, .generator = g, .seed = 12, .dims = {{"S", 4}, {"H", 16}, {"N", 160}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"sink", 2.0}, {"topk_length", 1}},
       .attrs = {{"softmax_scale", 0.1352337788608801}}, .doc = "sinks (heads at +-95) and topk_length"},
      {.name = "mla_prefill_flashmla", .stage = st, .generator = g, .seed = 13, .dims = {{"S", 3}, {"H", 64}, {"N", 192}, {"K", 128}},
       .params = {{"invalid_frac", 0.1}, {"oob_frac", 0.05}, {"lonely_every", 3}, {"topk_length", 1}},
       .attrs = {{"softmax_scale", 0.1352337788608801}, {"kernel", S(profiles::flashmla_sm90().name.c_str())}},
       .doc = "a case whose kernel claims flashmla-sm90: its output is the prefill emulation, bit for bit"},
  };
}

namespace {
// Rewrites out[i,h,:] = f(i, h, value) from the reference (then rounds to bf16).
template <class F>
void edit_out(Case& c, const Expected& E, F f) {
  Tensor& o = output(c, "out");
  const Tensor& ref = reft(E, "out").value;
  const std::int64_t H = ref.dim(1), dv = ref.dim(2);
  for (std::int64_t x = 0; x < ref.numel(); ++x)
    o.data<std::uint16_t>()[x] = num::f64_to_bf16(f(x / (H * dv), x / dv % H, ref.value(x)));
}
}  // namespace

std::vector<Mutant> mutants() {
  return {
      {"mla_prefill_minus1_as_token0", "B34", "mla_prefill", V{Verdict::FAIL, Verdict::NONFINITE},
       "invalid indices (-1) read as kv row 0 instead of masked",
       buggy([](Case& c) {
         edit_input(c, "indices", [](Tensor& t) { replace_padding(t, 0); });
       }),
       "B34"},
      {"mla_prefill_oob_unmasked", "v32 §6.1", "mla_prefill", V{Verdict::FAIL, Verdict::NONFINITE},
       "indices >= s_kv not masked (read modulo s_kv)",
       buggy([](Case& c) {
         const std::int64_t N = c.input("kv").dim(0);
         edit_input(c, "indices", [N](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) >= N) iset(t, i, t.int_at(i) % N);
         });
       })},
      // Shifts every element's bound still covers (the per-element worst case is wide where softmax weights cancel):
      // the systematic-error gate must catch them.
      {"mla_prefill_out_scaled_1pct", "v32 §7 systematic", "mla_prefill", V{Verdict::FAIL},
       "out 1 % too large (a constant factor off): within every element's bound, caught by the systematic gate",
       [](Case& c, const Expected&, std::uint64_t) { scale_bf16(output(c, "out"), 1.01); }},
      {"mla_prefill_out_scaled_half_pct", "v32 §7 systematic", "mla_prefill", V{Verdict::FAIL},
       "out 0.5 % too small", [](Case& c, const Expected&, std::uint64_t) { scale_bf16(output(c, "out"), 0.995); }},
      {"mla_prefill_lse_offset", "v32 §7 systematic", "mla_prefill", V{Verdict::FAIL},
       "lse 0.005 too large (a constant added to the log-sum-exp) on an otherwise exact lse (real lse errors are ~1e-6; "
       "the selftest's plausible noise on 64 values would hide a 0.005 offset)",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& l = output(c, "lse");
         const Tensor& ref = E.find("lse")->value;
         for (std::int64_t i = 0; i < l.numel(); ++i)
           if (std::isfinite(ref.data<float>()[i])) l.data<float>()[i] = static_cast<float>(ref.data<float>()[i] + 0.005);
       }},
      {"mla_prefill_lse_base2", "B35", "mla_prefill", V{Verdict::FAIL, Verdict::NONFINITE},
       "max_logits/lse in log2 units (the 2025 convention) where the dump pins natural log",
       buggy([](Case& c) { set_attr(c, "lse_base", S("2")); }), "B35 lse base"},
      {"mla_prefill_default_scale", "v32 §6.1", "mla_prefill", V{Verdict::FAIL},
       "softmax scale 576^-0.5 (the decode default) instead of the MLA scale",
       buggy([](Case& c) { set_attr(c, "softmax_scale", AttrValue{0.041666666666666664}); }), "v32 §6.2 softmax_scale"},
      {"mla_prefill_rope_dropped", "v32 §7", "mla_prefill", V{Verdict::FAIL}, "the 64 rope dims of q left out of q.k",
       buggy([](Case& c) {
         edit_input(c, "q", [](Tensor& t) {
           const std::int64_t D = t.dim(2);
           for (std::int64_t x = 0; x < t.numel(); ++x)
             if (x % D >= 512) t.data<std::uint16_t>()[x] = 0;
         });
       }),
       "v32 §7 RoPE"},
      {"mla_prefill_not_normalized", "v32 §6.1", "mla_prefill", V{Verdict::FAIL}, "out = sum_t p_t v_t without the 1/L",
       [](Case& c, const Expected& E, std::uint64_t) {
         const Tensor &lse = reft(E, "lse").value, &ml = reft(E, "max_logits").value;
         const std::int64_t H = lse.dim(1);
         edit_out(c, E, [&](std::int64_t i, std::int64_t h, double v) {
           const double l = lse.value(i * H + h), m = ml.value(i * H + h);
           return std::isfinite(l) && std::isfinite(m) ? v * num::det_exp(l - m) : v;
         });
       }},
      {"mla_prefill_leading_chunk_nan", "B32", "mla_prefill", V{Verdict::NONFINITE},
       "online softmax starting from -inf: rows whose first 64 indices are all invalid come out NaN",
       [](Case& c, const Expected& E, std::uint64_t) {
         const Tensor& idx = c.input("indices");
         const std::int64_t K = idx.dim(2), N = c.input("kv").dim(0);
         edit_out(c, E, [&](std::int64_t i, std::int64_t, double v) {
           for (std::int64_t p = 0; p < std::min<std::int64_t>(64, K); ++p) {
             const auto t = idx.int_at(i * K + p);
             if (t >= 0 && t < N) return v;
           }
           return std::nan("");
         });
       }},
      {"mla_prefill_sink_ignored", "B35", "mla_prefill_sink", V{Verdict::FAIL}, "attn_sink accepted but not applied",
       buggy([](Case& c) { c.inputs.erase("attn_sink"); }), "B35 sink"},
      {"mla_prefill_sink_in_numerator", "B35", "mla_prefill_sink", V{Verdict::FAIL},
       "the sink treated as a key with an all-ones value (e^sink added to the numerator as well as to L)",
       [](Case& c, const Expected& E, std::uint64_t) {
         const Tensor& lse = reft(E, "lse").value;
         const float* sink = c.input("attn_sink").data<float>();
         const std::int64_t H = lse.dim(1);
         edit_out(c, E, [&](std::int64_t i, std::int64_t h, double v) {
           const double l = lse.value(i * H + h);
           if (!std::isfinite(l)) return v;
           const double w = num::det_exp(sink[h] - l);
           return v + w / (1.0 + w);
         });
       },
       "B35 sink numerator"},
      // flashmla-sm90: what the bound cannot see. The plausible output is the emulation; one element changed by one
      // ulp (within every bound) must FAIL, and so must an exact (not FlashMLA) output.
      {"flashmla_out_one_ulp", "#39", "mla_prefill_flashmla", V{Verdict::FAIL},
       "kernel claims flashmla-sm90, one out element one bf16 ulp from what FlashMLA computes",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         plausible_outputs(c, E, seed);
         Tensor& o = output(c, "out");
         o.data<std::uint16_t>()[o.numel() / 3] ^= 1;
       }},
      {"flashmla_lse_1e-6", "#39", "mla_prefill_flashmla", V{Verdict::FAIL},
       "kernel claims flashmla-sm90, one lse value 1e-6 off",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         plausible_outputs(c, E, seed);
         Tensor& l = output(c, "lse");
         for (float& x : l.span<float>())
           if (std::isfinite(x)) {  // the first finite one (a lonely row's lse is +inf)
             x += 1e-6f;
             break;
           }
       }},
      {"flashmla_exact_not_kernel", "#39", "mla_prefill_flashmla", V{Verdict::FAIL},
       "kernel claims flashmla-sm90 but the output is another correct kernel's (the exact value perturbed inside the bound)",
       [](Case& c, const Expected& E, std::uint64_t seed) { other_kernel_outputs(c, E, seed + 1); }},
  };
}

}  // namespace dsa::attn::sparse_mla_prefill
