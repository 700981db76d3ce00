// v4.indexer: selftest cases and mutants modelled on real bug shapes (issue list: visibility (p+1)//4 off by one,
// indices offset by the window as the reference model does, unsorted output declared sorted, relu after the weighting,
// a scale dropped, -1 padding missing), each with the verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/v4/indexer/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::v4::indexer {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  return {
      {.name = "v4i", .stage = "v4.indexer", .generator = "v4i.requests", .seed = 41, .dims = {{"H", 8}, {"D", 32}, {"bs", 16}},
       .lists = {{"q_len", {3, 2, 4}}, {"kv_len", {70, 5, 4}}}, .attrs = {{"sparse_count", I(8)}},
       .doc = "rows with nvis 16..17 > k = 8, nvis 1 and nvis 0..1 (a fresh prefill)"},
      {.name = "v4i_d128", .stage = "v4.indexer", .generator = "v4i.requests", .seed = 45, .dims = {{"H", 8}, {"D", 128}, {"bs", 16}},
       .lists = {{"q_len", {2}}, {"kv_len", {120}}}, .params = {{"shared", 1.5}}, .attrs = {{"sparse_count", I(8)}},
       .doc = "head dim 128: int8 dots large enough to overflow fp16 without the 2^-10"},
      {.name = "v4i_cuda", .stage = "v4.indexer", .generator = "v4i.requests", .seed = 43, .dims = {{"H", 8}, {"D", 32}, {"bs", 16}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {70, 9}}}, .params = {{"vllm", 1}}, .attrs = {{"sparse_count", I(8)}, {"sorted", I(0)}},
       .doc = "variant vllm-cuda (e4m3, fp32 pow2 scales), an unsorted top-k"},
      {.name = "v4i_ref", .stage = "v4.indexer", .generator = "v4i.requests", .seed = 44, .dims = {{"H", 8}, {"D", 32}, {"bs", 16}},
       .lists = {{"q_len", {3, 2}}, {"kv_len", {70, 9}}}, .params = {{"ref", 1}}, .attrs = {{"sparse_count", I(8)}},
       .doc = "variant ref-bf16"},
  };
}

namespace {

std::function<void(Case&, const Expected&, std::uint64_t)> with_bug(Bug bug) { return reference_bug(&run, bug); }

// Every valid index of every row transformed by f (padding left alone).
template <typename F>
void each_index(Case& c, F f) {
  Tensor& o = output(c, "sparse_indices");
  for (std::int64_t i = 0; i < o.numel(); ++i)
    if (o.int_at(i) >= 0) iset(o, i, f(o.int_at(i)));
}

}  // namespace

std::vector<Mutant> mutants() {
  const V set_or_order{Verdict::FAIL, Verdict::STRUCTURE};
  return {
      {"v4i_visibility_plus1", "B29", "v4i", V{Verdict::STRUCTURE},
       "visibility (p+2)//4 instead of (p+1)//4: the entry of an incomplete group is scored",
       buggy([](Case& c) {
         edit_input(c, "actual_seq_lengths_key", [](Tensor& t) {
           for (std::int64_t b = 0; b < t.numel(); ++b) iset(t, b, t.int_at(b) + 1);
         });
       })},
      {"v4i_window_offset", "v4 §3.5", "v4i", V{Verdict::STRUCTURE},
       "indices offset by the window length (128) as the reference model's concatenated [window | compressed] buffer",
       [](Case& c, const Expected&, std::uint64_t) { each_index(c, [](std::int64_t x) { return x + 128; }); }},
      {"v4i_unsorted", "B9", "v4i", V{Verdict::STRUCTURE}, "indices in ascending index order although the op sorts by score",
       [](Case& c, const Expected&, std::uint64_t) { rows_ascending(output(c, "sparse_indices")); }},
      {"v4i_padding_zero", "B12", "v4i", V{Verdict::STRUCTURE}, "rows shorter than k padded with 0 instead of -1",
       [](Case& c, const Expected&, std::uint64_t) { replace_padding(output(c, "sparse_indices"), 0); }},
      {"v4i_relu_after_weighting", "B2", "v4i", set_or_order, "relu applied to w*s instead of s (sum_h relu(w_h s_h))",
       with_bug(Bug::relu_after_weighting)},
      {"v4i_no_2pow10", "v4 §3.5", "v4i_d128", set_or_order,
       "the Fixpipe's 2^-10 missing: s = fp16(relu(I)) overflows to inf for dots above 65504", with_bug(Bug::no_2pow10)},
      {"v4i_no_key_scale", "B3", "v4i", set_or_order, "key dequant scale ks16 not applied", with_bug(Bug::no_key_scale)},
      {"v4i_chunk_slots", "B42", "v4i", V{Verdict::FAIL},
       "chunked prefill: only the chunk's own q_len // 4 entries scored, the rest -inf", with_bug(Bug::chunk_slots)},
      {"v4i_width_2k", "B46", "v4i", V{Verdict::STRUCTURE}, "top-k width from the wrong config: min(2k, visible) indices emitted",
       [](Case& c, const Expected&, std::uint64_t seed) {
         Case d = c;  // the buggy kernel's output buffer holds 2k columns
         d.outputs.clear();
         d.expected.clear();
         set_attr(d, "sparse_count", I(2 * std::get<std::int64_t>(c.attrs.at("sparse_count"))));
         BoundCase b;
         if (auto pr = validate_case(d, false, &b); !pr.empty()) throw SchemaError(pr.front());
         plausible_outputs(d, run(d, dynamic_cast<const Params&>(*b.params), Bug::none, 1), seed);
         c.outputs = d.outputs;
       }},
      {"v4i_cuda_no_key_scale", "B3", "v4i_cuda", V{Verdict::FAIL}, "vllm-cuda: the fp32 key scale not applied to the logits",
       with_bug(Bug::no_key_scale)},
      {"v4i_cuda_relu_after_weighting", "B4", "v4i_cuda", V{Verdict::FAIL}, "vllm-cuda: relu applied to w*s instead of s",
       with_bug(Bug::relu_after_weighting)},
      {"v4i_cuda_window_offset", "v4 §3.5", "v4i_cuda", V{Verdict::STRUCTURE}, "vllm-cuda: indices offset by the window length (128)",
       [](Case& c, const Expected&, std::uint64_t) { each_index(c, [](std::int64_t x) { return x + 128; }); }},
      {"v4i_ref_relu_after_weighting", "B4", "v4i_ref", set_or_order, "ref-bf16: relu applied to w*s instead of s",
       with_bug(Bug::relu_after_weighting)},
      {"v4i_no_query_scale", "B3", "v4i", set_or_order, "query dequant scale qs16 not applied (wq = w16)",
       with_bug(Bug::no_query_scale)},
  };
}

}  // namespace dsa::v4::indexer
