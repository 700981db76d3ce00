// indexer.logits_ragged: selftest cases (the stage's own generators, small shapes) and mutants modelled on real bugs
// (validation_anchors.md §4 B-numbers), each with the verdict it must get.
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "numerics/rng.hpp"
#include "stage/mutant_kit.hpp"
#include "profiles/profiles.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::logits_ragged {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;

using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "ragged", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 1,
       .dims = {{"H", 32}, {"D", 64}, {"tail_keys", 4}}, .lists = {{"prefix", {4, 10}}, {"rows", {3, 3}}},
       .doc = "two sequences, chunked prefill, keys no row sees"},
      {.name = "ragged_sm90", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 1,
       .dims = {{"H", 32}, {"D", 64}}, .lists = {{"prefix", {10}}, {"rows", {6}}}, .attrs = {{"kernel", S(profiles::deepgemm_sm90().name.c_str())}},
       .doc = "a case whose kernel claims the deepgemm-sm90 profile"},
      {.name = "ragged_torch", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 3,
       .dims = {{"H", 64}, {"D", 128}, {"tail_keys", 2}}, .lists = {{"prefix", {0, 12}}, {"rows", {4, 4}}},
       .attrs = {{"kernel", S(profiles::vllm_torch().name.c_str())}},
       .doc = "a case whose kernel is vLLM's torch fallback (vllm-torch: bf16 head scores, derived bound)"},
  };
}

std::vector<Mutant> mutants() {
  return {
      {"ragged_k_scale_dropped", "B6", "ragged", V{Verdict::FAIL}, "kv_scale not applied (read as 1)",
       mutant::buggy([](Case& c) { edit_input(c, "kv_scale", [](Tensor& t) { for (auto& x : t.span<float>()) x = 1.0f; }); }), "B6"},
      {"ragged_relu_missing", "B4", "ragged", V{Verdict::FAIL}, "head scores summed without ReLU",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "logits");
         const RefTensor& rt = reft(E, "logits");
         const Tensor &q = c.input("q"), &kv = c.input("kv"), &sc = c.input("kv_scale"), &w = c.input("weights");
         const std::int64_t H = q.dim(1), D = q.dim(2), W = o.dim(1), msk = c.attr_int("max_seqlen_k");  // defaults applied
         for (std::int64_t f : finite_defined(rt)) {
           const std::int64_t i = f / W, j = msk > 0 ? c.input("ks").data<std::int32_t>()[i] + f % W : f % W;
           double sum = 0;
           for (std::int64_t h = 0; h < H; ++h) {
             double s = 0;
             for (std::int64_t d = 0; d < D; ++d) s += q.value((i * H + h) * D + d) * kv.value(j * D + d);
             sum += s * w.value(i * H + h);  // no relu
           }
           o.set_value(f, sum * sc.value(j));
         }
       }, "B4"},
      {"ragged_causal_off_by_one", "B15", "ragged", V{Verdict::MASK_MISMATCH}, "one key past ke[i] is visible",
       mutant::buggy([](Case& c) {
         const std::int64_t N = c.input("kv").dim(0);
         edit_input(c, "ke", [N](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < N) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"ragged_nan_logit", "B14", "ragged", V{Verdict::NONFINITE}, "one defined logit is NaN (unwritten / OOB read)",
       [](Case& c, const Expected& E, std::uint64_t seed) {
         const auto fd = finite_defined(reft(E, "logits"));
         Rng r(seed, 7);
         output(c, "logits").set_value(fd[static_cast<std::size_t>(r.randint(0, static_cast<std::int64_t>(fd.size()) - 1))],
                                       std::numeric_limits<double>::quiet_NaN());
       }},
      {"ragged_zero_logits", "B6", "ragged", V{Verdict::FAIL}, "all logits zero (scale aliasing reads zeros)",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "logits");
         for (std::int64_t f : finite_defined(reft(E, "logits"))) o.set_value(f, 0.0);
       }},
      {"torch_relu_missing", "B4", "ragged_torch", V{Verdict::FAIL}, "vllm-torch: head scores summed without ReLU",
       [](Case& c, const Expected& E, std::uint64_t) {
         Tensor& o = output(c, "logits");
         const RefTensor& rt = reft(E, "logits");
         const Tensor &q = c.input("q"), &kv = c.input("kv"), &sc = c.input("kv_scale"), &w = c.input("weights");
         const std::int64_t H = q.dim(1), D = q.dim(2), W = o.dim(1);
         for (std::int64_t f : finite_defined(rt)) {
           const std::int64_t i = f / W, j = f % W;
           double sum = 0;
           for (std::int64_t h = 0; h < H; ++h) {
             double s = 0;
             for (std::int64_t d = 0; d < D; ++d) s += q.value((i * H + h) * D + d) * kv.value(j * D + d);
             sum += static_cast<double>(num::round_to_bf16(static_cast<float>(s))) * w.value(i * H + h);  // no relu
           }
           o.set_value(f, sum * sc.value(j));
         }
       }, "B4"},
      {"torch_k_scale_dropped", "B6", "ragged_torch", V{Verdict::FAIL}, "vllm-torch: k_scale not applied (read as 1)",
       mutant::buggy([](Case& c) { edit_input(c, "kv_scale", [](Tensor& t) { for (auto& x : t.span<float>()) x = 1.0f; }); }), "B6"},
      {"torch_k_scale_twice", "B6", "ragged_torch", V{Verdict::FAIL}, "vllm-torch: k_scale applied twice (dequantised keys scaled again)",
       mutant::buggy([](Case& c) { edit_input(c, "kv_scale", [](Tensor& t) { for (auto& x : t.span<float>()) x = x * x; }); })},
      {"torch_mask_off_by_one", "B15", "ragged_torch", V{Verdict::MASK_MISMATCH}, "vllm-torch: mask keeps key ke (<= instead of <)",
       mutant::buggy([](Case& c) {
         const std::int64_t N = c.input("kv").dim(0);
         edit_input(c, "ke", [N](Tensor& t) {
           for (std::int64_t i = 0; i < t.numel(); ++i)
             if (t.int_at(i) < N) iset(t, i, t.int_at(i) + 1);
         });
       })},
      {"torch_weights_halved", "torch", "ragged_torch", V{Verdict::FAIL},
       "vllm-torch: the q scale folded into the weights lost (weights / 2 on every head: a power-of-two scale off by one step)",
       mutant::buggy([](Case& c) { edit_input(c, "weights", [](Tensor& t) { for (auto& x : t.span<float>()) x = x * 0.5f; }); })},
      {"sm90_not_bitexact", "B21", "ragged_sm90", V{Verdict::FAIL},
       "kernel claims deepgemm-sm90 but its logits differ from the emulation (inside the sm90 bound)",
       [](Case& c, const Expected& E, std::uint64_t seed) { mutant::other_kernel_outputs(c, E, seed + 1); }}
  };
}

}  // namespace dsa::indexer::logits_ragged
