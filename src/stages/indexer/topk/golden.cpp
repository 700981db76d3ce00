// indexer.topk: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/topk/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::topk {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

namespace {

enum class TopkDist { gaussian, ties_at_kth, near_ties, constant };

float topk_value(TopkDist d, Rng& rng, std::int64_t row, std::int64_t p, float base) {
  switch (d) {
    case TopkDist::gaussian: return f32(base + 2.0 * rng.normal());
    case TopkDist::near_ties: {  // within one ulp of the row's base value
      const std::uint32_t b = num::f32_bits(base);
      return num::f32_from_bits(static_cast<std::uint32_t>(static_cast<std::int64_t>(b) + rng.randint(-1, 1)));
    }
    case TopkDist::constant: {
      static const float kConst[] = {0.0f, -3.5f, 1.0f, 0.0f, 1e-30f, -2.0f};
      const float v = kConst[row % 6];
      return (row % 6 == 3 && (p % 3 == 1)) ? -0.0f : v;  // row 3: +0 / -0 mixed (equal values, different bits)
    }
    case TopkDist::ties_at_kth: break;  // built by gen_topk (needs the row's permutation)
  }
  return base;
}

void gen_topk(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, TopkDist dist) {
  const Rng root(seed);
  const std::int64_t k = c.attr_int("k");
  const auto lens = s.list("lengths");
  const std::int64_t R = static_cast<std::int64_t>(lens.size());
  const auto starts = list_or(s, "row_starts", std::vector<std::int64_t>(static_cast<std::size_t>(R), 0));
  if (static_cast<std::int64_t>(starts.size()) != R) throw std::invalid_argument(s.name + ": lists lengths and row_starts differ in length");
  std::int64_t C = s.dim("C", 1);
  for (std::int64_t r = 0; r < R; ++r) C = std::max(C, starts[static_cast<std::size_t>(r)] + lens[static_cast<std::size_t>(r)]);
  // Columns outside a row's range hold +1e20 garbage (vLLM's padding trick; uncleaned DeepGEMM logits) or -inf.
  const float outside = s.param("outside_garbage", 1) != 0 ? 1e20f : -std::numeric_limits<float>::infinity();
  Tensor lg(DType::f32, {R, C});
  const std::int64_t ties = s.dim("ties", 1024);
  for_rows(root, kLogits, R, threads, [&](std::int64_t r, Rng& rng) {
    float* row = lg.data<float>() + r * C;
    std::fill_n(row, C, outside);
    const std::int64_t L = lens[static_cast<std::size_t>(r)], s0 = starts[static_cast<std::size_t>(r)];
    const float base = f32(rng.uniform(-4.0, 4.0));
    if (dist == TopkDist::ties_at_kth) {
      const std::int64_t above = std::max<std::int64_t>(0, std::min(L, k - ties / 2));
      const std::int64_t tie_n = std::min(L - above, ties);
      const auto perm = permutation(rng.fork(1), L);
      Rng vr = rng.fork(2);
      for (std::int64_t i = 0; i < L; ++i) {
        const float v = i < above ? f32(2.0 + vr.uniform()) : i < above + tie_n ? 1.0f : f32(vr.uniform(-5.0, 0.875));
        row[s0 + perm[static_cast<std::size_t>(i)]] = v;
      }
      return;
    }
    for (std::int64_t p = 0; p < L; ++p) row[s0 + p] = topk_value(dist, rng, r, p, base);
  });
  c.inputs["logits"] = lg;
  std::vector<std::int32_t> l32, s32;
  for (std::int64_t r = 0; r < R; ++r) {
    l32.push_back(static_cast<std::int32_t>(lens[static_cast<std::size_t>(r)]));
    s32.push_back(static_cast<std::int32_t>(starts[static_cast<std::size_t>(r)]));
  }
  c.inputs["lengths"] = Tensor::from_vector(DType::i32, {R}, l32);
  if (s.has_list("row_starts")) c.inputs["row_starts"] = Tensor::from_vector(DType::i32, {R}, s32);
  const std::string base = c.attr_str("index_base");
  if (base == "ragged_offset") {  // rows of a packed ragged batch: offset = where the row's keys start
    std::vector<std::int32_t> off;
    std::int64_t acc = 0;
    for (std::int64_t r = 0; r < R; ++r) {
      off.push_back(static_cast<std::int32_t>(acc));
      acc += lens[static_cast<std::size_t>(r)];
    }
    c.inputs["offsets"] = Tensor::from_vector(DType::i32, {R}, off);
  }
  if (base == "page_slot") {  // shuffled pages per request (rows_per_request rows share a page_table row)
    const std::int64_t rpr = c.attr_int("rows_per_request");
    const std::int64_t ps = c.attr_int("page_size");
    if (R % rpr != 0) throw std::invalid_argument(s.name + ": rows must be a multiple of rows_per_request");
    const std::int64_t Q = R / rpr;
    std::int64_t nb = 1;
    for (std::int64_t r = 0; r < R; ++r) nb = std::max(nb, (starts[static_cast<std::size_t>(r)] + lens[static_cast<std::size_t>(r)] + ps - 1) / ps);
    const auto perm = permutation(root.fork(kPerm), Q * nb + 3);
    std::vector<std::int32_t> pt(static_cast<std::size_t>(Q * nb));
    for (std::size_t i = 0; i < pt.size(); ++i) pt[i] = static_cast<std::int32_t>(perm[i]);
    c.inputs["page_table"] = Tensor::from_vector(DType::i32, {Q, nb}, pt);
  }
}

GenerateFn topk_gen(TopkDist d) {
  return [d](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { gen_topk(s, seed, th, c, d); };
}

}  // namespace

std::vector<Generator> generators() {
  return {
      {"topk.gaussian", "indexer.topk",
       "rows N(base, 2) over [row_start, row_start+len), +1e20 garbage (or -inf) outside. list lengths, row_starts; "
       "params outside_garbage",
       topk_gen(TopkDist::gaussian)},
      {"topk.ties_at_kth", "indexer.topk",
       "k - ties/2 values in [2,3), `ties` exact copies of 1.0, the rest below: the k-th value is tied ~ties times. "
       "list lengths; dims ties",
       topk_gen(TopkDist::ties_at_kth)},
      {"topk.near_ties", "indexer.topk", "every value within one fp32 ulp of the row's base value. list lengths",
       topk_gen(TopkDist::near_ties)},
      {"topk.constant_rows", "indexer.topk",
       "per-row constant logits (0, -3.5, 1, +0/-0 mixed, 1e-30, -2): the whole row is one tie. list lengths",
       topk_gen(TopkDist::constant)}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "topk_nonfinite_rows", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 609,
       .lists = {{"lengths", {300, 300, 300, 300, 100}}}, .params = {{"outside_garbage", 0}}, .attrs = {{"k", I(64)}},
       .poison = {{"logits", 1, -1, kNaN}, {"logits", 2, 17, kInf}, {"logits", 2, 18, kInf}, {"logits", 3, 5, -kInf},
                  {"logits", 3, 6, kNaN}, {"logits", 4, 50, kNaN}},
       .doc = "NaN policy: an all-NaN row (any selection), +inf scores, NaN candidates (ranked above +inf, as torch.topk), -inf, a NaN in a short row"},
      {.name = "topk_lengths_sparse", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 601,
       .lists = {{"lengths", {0, 1, 2047, 2048, 2049, 3000, 4096}}}, .attrs = {{"k", I(2048)}},
       .doc = "lengths 0, 1, k-1, k, k+1 (fast path edge) and rows longer than k (sparsity engaged); +1e20 garbage outside"},
      {.name = "topk_ties_at_kth", .stage = "indexer.topk", .generator = "topk.ties_at_kth", .seed = 602,
       .dims = {{"ties", 1024}}, .lists = {{"lengths", {4096, 4096, 2600}}}, .attrs = {{"k", I(2048)}},
       .doc = "1024 exact copies of the k-th value: any tie choice is right, any value below it is wrong"},
      {.name = "topk_near_ties", .stage = "indexer.topk", .generator = "topk.near_ties", .seed = 603,
       .lists = {{"lengths", {3000, 2049, 4096}}}, .attrs = {{"k", I(2048)}},
       .doc = "every score within one fp32 ulp of the row's value: the radix refinement down to the last bit"},
      {.name = "topk_constant_rows", .stage = "indexer.topk", .generator = "topk.constant_rows", .seed = 604,
       .lists = {{"lengths", {2100, 2100, 2100, 3000, 2049, 2200}}}, .attrs = {{"k", I(2048)}},
       .doc = "per-row constant logits incl. a +0/-0 mix: the whole row is one tie"},
      {.name = "topk_page_slot_mtp", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 605,
       .lists = {{"lengths", {2999, 3000, 2048, 2049}}},
       .attrs = {{"k", I(2048)}, {"index_base", S("page_slot")}, {"rows_per_request", I(2)}, {"page_size", I(64)}},
       .doc = "MTP rows (next_n = 2) mapped to physical KV slots through shuffled page tables (sglang / FlashMLA)"},
      {.name = "topk_ragged_offset_chunked", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 606,
       .lists = {{"lengths", {2500, 2400, 2100}}, {"row_starts", {0, 100, 2500}}},
       .attrs = {{"k", I(2048)}, {"index_base", S("ragged_offset")}},
       .doc = "ragged prefill rows with row_starts > 0 and per-row offsets into the gathered KV"},
      {.name = "topk_absolute_sorted", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 607,
       .lists = {{"lengths", {2300, 2049}}, {"row_starts", {0, 7}}}, .params = {{"outside_garbage", 0}},
       .attrs = {{"k", I(2048)}, {"index_base", S("absolute")}, {"sorted", I(1)}},
       .doc = "demo torch.topk: absolute positions, sorted descending, -inf outside the rows"},
      {.name = "topk_long_rows", .stage = "indexer.topk", .generator = "topk.gaussian", .seed = 608,
       .lists = {{"lengths", {65535, 65537, 65536}}}, .attrs = {{"k", I(2048)}}, .committed = false,
       .doc = "lengths 2^16-1, 2^16+1, 2^16 (radix threshold-bin pressure); large, not committed"},
  };
}

}  // namespace dsa::indexer::topk
