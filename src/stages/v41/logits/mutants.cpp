// v41.logits: selftest cases and mutants (a missing ReLU, swapped nibbles, unapplied key scales, the sparse column
// mapping ignored), each reproduced through the reference and diagnosed by its own hint.
#include <cstring>

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
      {.name = "v41lg_sparse_mid_group", .stage = "v41.logits", .generator = "v41lg.sparse", .seed = 63,
       .dims = {{"H", 8}, {"page_size", 128}, {"pages", 4}, {"nsb", 8}}, .lists = {{"context", {201, 77}}},
       .attrs = {{"logits_dtype", S("bf16")}}, .doc = "paged sparse: rows whose newest position is mid-group for ratio 2 (odd lengths)"},
  };
}

namespace {
// The outputs of a kernel whose rows (all, or those at a mid-group step: odd context lengths) score a foreign K
// cache: keys of the same pages and scales with other values (every code byte ^ 0x11), the other rows as they are.
void foreign_cache(Case& c, std::uint64_t seed, bool mid_group_only) {
  Case w = c;
  edit_input(w, "kv_cache", [](Tensor& t) {
    const std::int64_t ps = t.dim(1);
    for (std::int64_t page = 0; page < t.dim(0); ++page)  // the code bytes of every slot (page_segregated: first ps * 64)
      for (std::int64_t i = 0; i < ps * 64; ++i) t.data<std::uint8_t>()[page * ps * 68 + i] ^= 0x11;
  });
  BoundCase b, a;
  if (auto pr = validate_case(w, false, &b); !pr.empty()) throw SchemaError(pr.front());
  if (auto pr = validate_case(c, false, &a); !pr.empty()) throw SchemaError(pr.front());
  const Expected E = run(w, dynamic_cast<const Params&>(*b.params), Bug::none, 1);
  Expected mixed = run(c, dynamic_cast<const Params&>(*a.params), Bug::none, 1);
  Tensor& v = mixed.tensors.front().value;
  const Tensor& f = E.tensors.front().value;
  const Tensor& cl = c.input("context_lens");
  const std::int64_t cols = v.dim(1), es = static_cast<std::int64_t>(v.nbytes() / static_cast<std::size_t>(v.numel()));
  for (std::int64_t r = 0; r < v.dim(0); ++r)
    if (!mid_group_only || cl.int_at(r) % 2 == 1)
      std::memcpy(v.raw() + r * cols * es, f.raw() + r * cols * es, static_cast<std::size_t>(cols * es));
  c.outputs.clear();
  plausible_outputs(c, mixed, seed);
}
}  // namespace

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
       [](Case& c, const Expected&, std::uint64_t seed) { foreign_cache(c, seed, false); }},
      // B47 (transformers #48721): the reference publishes index_k only when a latent is emitted, so on a mid-group
      // step (position p with (p + 1) % 2 != 0: an odd context length) a ratio-2 owner scores a foreign,
      // earlier-published key cache.
      {"v41lg_b47_foreign_cache_mid_group", "B47", "v41lg_sparse_mid_group", fail,
       "rows at a mid-group step of a ratio-2 owner (odd context length) score a foreign, earlier-published K cache",
       [](Case& c, const Expected&, std::uint64_t seed) { foreign_cache(c, seed, true); }},
  };
}

}  // namespace dsa::v41::logits
