// v41.logits: selftest cases and mutants (a missing ReLU, swapped nibbles, unapplied key scales, the sparse column
// mapping ignored), each reproduced through the reference and diagnosed by its own hint.
#include "stage/mutant_kit.hpp"
#include "stages/v41/logits/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v41::logits {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;
using golden::S;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "v41lg_ragged", .stage = "v41.logits", .generator = "v41lg.ragged", .seed = 61, .dims = {{"R", 4}, {"H", 8}, {"N", 64}},
       .doc = "ragged f32 logits"},
      {.name = "v41lg_sparse", .stage = "v41.logits", .generator = "v41lg.sparse", .seed = 62,
       .dims = {{"H", 8}, {"page_size", 128}, {"pages", 4}, {"nsb", 8}}, .lists = {{"context", {200, 150}}},
       .attrs = {{"logits_dtype", S("bf16")}}, .doc = "paged sparse bf16 logits"},
  };
}

std::vector<Mutant> mutants() {
  const V fail{Verdict::FAIL};
  auto rb = [](Bug b) { return reference_bug(&run, b); };
  return {
      {"v41lg_no_relu", "B4", "v41lg_ragged", fail, "head scores summed without the ReLU", rb(Bug::no_relu), "B4"},
      {"v41lg_nibbles_swapped", "B52", "v41lg_sparse", fail, "e2m1 nibbles read high-first", rb(Bug::nibbles_swapped), "B52"},
      {"v41lg_kv_scale_ignored", "B6", "v41lg_ragged", fail, "the keys' ue8m0 scales not applied", rb(Bug::kv_scale_ignored), "B6"},
      {"v41lg_sparse_map_ignored", "v41 §5", "v41lg_sparse", fail, "column c read as position c (the candidate blocks ignored)",
       rb(Bug::sparse_map_ignored), "v41 §5"},
      // A consumer layer handed another KV source layer's indexer cache (layers 24..39 must read layer 20's): keys of
      // the same pages and scales but other values. No hint can name it from one case: in layer_v41_decode the chain
      // puts the first divergence at the consumer's logits.
      {"v41lg_wrong_source_cache", "v41 §1", "v41lg_sparse", fail, "the consumer scores another source layer's K cache",
       [](Case& c, const Expected&, std::uint64_t seed) {
         Case w = c;
         edit_input(w, "kv_cache", [](Tensor& t) {
           const std::int64_t ps = t.dim(1);
           for (std::int64_t page = 0; page < t.dim(0); ++page)  // the code bytes of every slot (page_segregated: first ps * 64)
             for (std::int64_t i = 0; i < ps * 64; ++i) t.data<std::uint8_t>()[page * ps * 68 + i] ^= 0x11;
         });
         BoundCase b;
         if (auto pr = validate_case(w, false, &b); !pr.empty()) throw SchemaError(pr.front());
         const Expected E = run(w, dynamic_cast<const Params&>(*b.params), Bug::none, 1);
         c.outputs.clear();
         plausible_outputs(c, E, seed);
       }},
  };
}

}  // namespace dsa::v41::logits
