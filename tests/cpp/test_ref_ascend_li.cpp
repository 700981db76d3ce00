// indexer.npu_lightning: the per-candidate score bound is rigorous for fp32 kernels in adversarial orders (and not
// vacuous), the CP split with positions is the unsplit call, and the one scorer (core::score_thread) gives the same
// bytes on 1 thread, on all threads and on the GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "numerics/formats.hpp"
#include "pipeline/golden.hpp"
#include "ref_test_util.hpp"
#include "stages/indexer/npu_lightning/stage.hpp"

using namespace dsa;

namespace {

// fp32 dot in a given order (0 ascending, 1 descending, 2 pairwise), as a kernel whose order is unknown might.
float dot32(const std::vector<float>& q, const std::vector<float>& k, int order) {
  const std::size_t n = q.size();
  if (order == 2) {
    std::vector<float> p(n);
    for (std::size_t i = 0; i < n; ++i) p[i] = q[i] * k[i];
    for (std::size_t w = 1; w < n; w *= 2)
      for (std::size_t i = 0; i + w < n; i += 2 * w) p[i] = p[i] + p[i + w];
    return p[0];
  }
  float s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = order == 0 ? i : n - 1 - i;
    s = s + q[j] * k[j];
  }
  return s;
}

float bf(std::uint16_t b) { return num::bf16_to_f32(b); }

}  // namespace

TEST_CASE("indexer.npu_lightning: fp32 kernels in three dot orders and the A3 head tree stay inside the bound") {
  const auto* st = find_stage("indexer.npu_lightning");
  REQUIRE(st);
  golden::GoldenSpec spec{.name = "bound", .stage = "indexer.npu_lightning", .generator = "li_npu.requests", .seed = 9,
                          .dims = {{"H", 64}, {"D", 128}, {"bs", 16}}, .lists = {{"q_len", {2}}, {"kv_len", {300}}},
                          .params = {{"shared", 3.0}}};
  Expected E;
  const Case c = golden::make_case(spec, std::nullopt, 1, &E);
  const RefTensor& r = *E.find("sparse_indices");
  const Tensor& q = c.input("query");
  const Tensor& key = c.input("key");
  const Tensor& w = c.input("weights");
  const Tensor& bt = c.input("block_table");
  const std::int64_t H = 64, D = 128, bs = 16, C = r.topk.scores.dim(1);
  double worst = 0, max_err = 0;
  int nonzero = 0;
  for (std::int64_t t = 0; t < 2; ++t) {
    const std::int64_t nvis = r.topk.len[static_cast<std::size_t>(t)];
    CHECK(nvis == 299 + t);
    for (std::int64_t j = 0; j < nvis; ++j) {
      const std::int64_t slot = static_cast<std::int64_t>(bt.data<std::int32_t>()[j / bs]) * bs + j % bs;
      std::vector<float> kv(D);
      for (std::int64_t d = 0; d < D; ++d) kv[static_cast<std::size_t>(d)] = bf(key.data<std::uint16_t>()[slot * D + d]);
      for (int order = 0; order < 3; ++order) {
        std::vector<float> p(H);
        for (std::int64_t h = 0; h < H; ++h) {
          std::vector<float> qv(D);
          for (std::int64_t d = 0; d < D; ++d) qv[static_cast<std::size_t>(d)] = bf(q.data<std::uint16_t>()[(t * H + h) * D + d]);
          p[static_cast<std::size_t>(h)] = bf(w.data<std::uint16_t>()[t * H + h]) * std::max(dot32(qv, kv, order), 0.0f);
        }
        std::vector<float> lane(16);  // the A3 head sum: 16 lanes, then 8/4/2/1
        for (int l = 0; l < 16; ++l) lane[l] = ((p[l] + p[16 + l]) + p[32 + l]) + p[48 + l];
        for (int n = 8; n >= 1; n /= 2)
          for (int l = 0; l < n; ++l) lane[l] = lane[l] + lane[l + n];
        const double ref = r.topk.scores.data<double>()[t * C + j], u = r.topk.bounds.data<double>()[t * C + j];
        const double err = std::fabs(static_cast<double>(lane[0]) - ref);
        CHECK(err <= u);
        worst = std::max(worst, err / u);
        max_err = std::max(max_err, err);
        nonzero += err > 0;
      }
    }
  }
  CHECK(nonzero > 100);  // the fp32 kernels do round: the check can fail
  CHECK(worst > 1e-3);   // and the bound is not vacuous (within 3 decades of the observed error)
  MESSAGE("worst err/bound " << worst << ", max err " << max_err);
}

TEST_CASE("indexer.npu_lightning: a CP split with positions equals the unsplit call row by row") {
  golden::GoldenSpec split{.name = "split", .stage = "indexer.npu_lightning", .generator = "li_npu.requests", .seed = 5,
                           .dims = {{"H", 16}, {"D", 32}, {"bs", 16}},
                           .lists = {{"q_len", {2, 2}}, {"kv_len", {10, 30}}, {"q_len_next", {2, 1}}, {"kv_len_next", {40, 31}}},
                           .attrs = {{"sparse_count", golden::I(8)}}};
  Expected Es;
  Case c = golden::make_case(split, std::nullopt, 1, &Es);
  // The unsplit view of the same rows: one call per row (q_len 1 each) at the row's position, through one block table row
  // per call row.
  Case u = c;
  const Tensor& pos = c.input("positions");
  const std::int64_t T = pos.numel(), maxblk = c.input("block_table").dim(1);
  Tensor aq(DType::i32, {T}), ak(DType::i32, {T}), bt(DType::i32, {T, maxblk});
  const std::int64_t rows_b[] = {0, 0, 1, 1, 0, 0, 1};
  for (std::int64_t t = 0; t < T; ++t) {
    aq.data<std::int32_t>()[t] = static_cast<std::int32_t>(t + 1);
    ak.data<std::int32_t>()[t] = static_cast<std::int32_t>(pos.int_at(t) + 1);
    for (std::int64_t j = 0; j < maxblk; ++j)
      bt.data<std::int32_t>()[t * maxblk + j] = c.input("block_table").data<std::int32_t>()[rows_b[t] * maxblk + j];
  }
  u.inputs = {{"query", c.input("query")}, {"key", c.input("key")}, {"weights", c.input("weights")}, {"block_table", bt},
              {"actual_seq_lengths_query", aq}, {"actual_seq_lengths_key", ak}};
  u.attrs.erase("cp_split");
  u.outputs.clear();
  u.expected.clear();
  const Expected Eu = test::run_reference(u);
  const Tensor& a = Es.find("sparse_indices")->value;
  const Tensor& b = Eu.find("sparse_indices")->value;
  REQUIRE(a.numel() == b.numel());
  for (std::int64_t i = 0; i < a.numel(); ++i) CHECK(a.int_at(i) == b.int_at(i));
}

TEST_CASE("indexer.npu_lightning: the one scorer (the CUDA kernel body, which the CPU runs) gives the same bytes on 1 thread, on all threads and on the GPU when present") {
  // Every golden and selftest case, plus shapes the kernels must not assume away: H not a multiple of 16, odd D and
  // block size, fp16 with f32 weights, a CP split, NaN / inf planted (canonical NaN bits on both sides).
  const char* g = "li_npu.requests";
  std::vector<golden::GoldenSpec> specs = {
      {.name = "odd", .stage = "indexer.npu_lightning", .generator = g, .seed = 5, .dims = {{"H", 12}, {"D", 37}, {"bs", 5}},
       .lists = {{"q_len", {3, 1, 2}}, {"kv_len", {40, 1, 7}}}, .params = {{"fp16", 1}, {"wf32", 1}, {"dup_keys", 1}},
       .attrs = {{"sparse_count", golden::I(9)}}, .poison = {{"weights", 1, 3, golden::kNaN}, {"query", 4, 17, -golden::kInf}}},
      {.name = "odd_cp", .stage = "indexer.npu_lightning", .generator = g, .seed = 6, .dims = {{"H", 16}, {"D", 8}, {"bs", 3}},
       .lists = {{"q_len", {2, 1}}, {"kv_len", {2, 20}}, {"q_len_next", {2, 1}}, {"kv_len_next", {9, 30}}},
       .attrs = {{"sparse_count", golden::I(4)}, {"variant", golden::S("ascend-950")}},
       .poison = {{"query", 0, 2, golden::kInf}}},
  };
  test::check_thread_and_gpu_agreement<indexer::npu_lightning::Params>(
      "indexer.npu_lightning", std::move(specs), [](const Case& c, const indexer::npu_lightning::Params& p, const RefOptions&) {
        return indexer::npu_lightning::run(c, p, indexer::npu_lightning::Bug::none, 1);
      });
}
