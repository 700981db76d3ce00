// attn.v4_sparse: selftest cases and mutants modelled on real bug shapes (spec v4 §4.2-4.3, §7; validation_anchors
// B15/B16, real_bugs_2026 B35), each with the verdict it must get.
#include "stage/mutant_kit.hpp"
#include "stages/attn/v4_sparse/stage.hpp"

#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::attn::v4_sparse {

using namespace mutant;
using cmp::Verdict;
using V = std::vector<Verdict>;
using golden::I;

std::vector<golden::GoldenSpec> selftest_cases() {
  const char* st = "attn.v4_sparse";
  const char* g = "v4_sparse.requests";
  return {
      {.name = "v4sa", .stage = st, .generator = g, .seed = 31, .dims = {{"N", 16}, {"D", 64}, {"bs_o", 16}, {"bs_c", 16}, {"K", 16}},
       .lists = {{"q_len", {3, 2, 1}}, {"kv_len", {260, 70, 2}}}, .params = {{"sink", 2.0}, {"poison_unused", 1}},
       .attrs = {{"cmp_ratio", I(4)}},
       .doc = "C4: a prefill chunk with 64 visible entries (list cut at K = 16), MTP rows with 17 entries, a 2-token request"},
      {.name = "v4sa_c128", .stage = st, .generator = g, .seed = 32, .dims = {{"N", 16}, {"D", 64}, {"bs_o", 16}, {"bs_c", 16}},
       .lists = {{"q_len", {4, 2}}, {"kv_len", {258, 383}}}, .params = {{"sink", 2.0}},
       .attrs = {{"cmp_ratio", I(128)}},
       .doc = "C128: rows at positions 254 and 382 (one token before a group completes)"},
  };
}

namespace {
std::function<void(Case&, const Expected&, std::uint64_t)> bug(Bug b) { return reference_bug(&run, b); }
}  // namespace

std::vector<Mutant> mutants() {
  const V fail{Verdict::FAIL};
  const V fail_nf{Verdict::FAIL, Verdict::NONFINITE};
  return {
      {"v4sa_window_without_current", "B16", "v4sa", fail, "the window [p - 127, p - 1]: the current token missing",
       bug(Bug::window_without_current), "B16 window end"},
      {"v4sa_window_one_wider", "B16", "v4sa", fail_nf, "the window starting at p - 128 (129 tokens; the extra row is NaN-poisoned)",
       bug(Bug::window_one_wider)},
      {"v4sa_no_window", "B16", "v4sa", fail, "the sliding-window scope dropped (compressed entries only)", bug(Bug::no_window), "B16"},
      {"v4sa_cmp_one_group_early", "B15", "v4sa_c128", fail_nf, "compressed entry j visible from position 128j + 126 ((p+2)//r)",
       bug(Bug::cmp_one_group_early), "B15"},
      {"v4sa_no_cmp", "v4 §4.2", "v4sa", fail, "the compressed scope ignored (window only)", bug(Bug::no_cmp), "v4 §4.2 compressed scope"},
      {"v4sa_no_cmp_c128", "v4 §4.2", "v4sa_c128", fail, "C128: the compressed scope ignored", bug(Bug::no_cmp), "v4 §4.2 compressed scope"},
      {"v4sa_chunk_position", "B19", "v4sa", fail_nf, "position = the row inside the request (kv_len - q_len offset missing)",
       bug(Bug::chunk_position)},
      {"v4sa_cmp_window_offset", "v4 §7", "v4sa", fail,
       "C4 entries read as the reference model's concatenated [window ; compressed] list (entry j - 128: with entries below 128 "
       "nothing of the compressed scope is read, hence that diagnosis)", bug(Bug::cmp_window_offset),
       "v4 §4.2 compressed scope"},
      {"v4sa_sink_dropped", "B35", "v4sa", fail, "sinks accepted but not applied",
       buggy([](Case& c) { c.inputs.erase("sinks"); }), "B35 sink"},
      {"v4sa_sink_in_numerator", "B35", "v4sa", fail, "the sink treated as a key with an all-ones value",
       bug(Bug::sink_in_numerator), "B35 sink numerator"},
      {"v4sa_indexer_scale", "v4 §4.3", "v4sa", fail, "softmax_scale 128^-0.5 (the indexer head dim) instead of 512^-0.5",
       buggy([](Case& c) { set_attr(c, "softmax_scale", AttrValue{0.08838834764831845}); })},
  };
}

}  // namespace dsa::attn::v4_sparse
