// indexer.logits_ragged: input generators and golden catalogue rows (docs/golden.md). Seeds are fixed: changing a row changes
// the committed goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "numerics/formats.hpp"
#include "stage/gen/gen.hpp"
#include "stages/indexer/logits_ragged/stage.hpp"

// The rows use designated initializers and leave unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::indexer::logits_ragged {

using namespace gen;
using golden::GenerateFn;
using golden::Generator;
using golden::I;
using golden::S;
using golden::kInf;
using golden::kNaN;

namespace {

struct RaggedRows {
  std::vector<std::int32_t> ks, ke;
  std::int64_t N = 0;
};

void build_ragged(const GoldenSpec& s, std::uint64_t seed, int threads, Case& c, const RaggedRows& rr, bool all_negative) {
  const Rng root(seed);
  const std::int64_t S = static_cast<std::int64_t>(rr.ks.size()), H = s.dim("H", s.model.n_heads), D = s.dim("D", s.model.head_dim);
  QBuild qb = make_q(root, S, H, D, threads, all_negative ? -1 : 0, all_negative ? 8 : 0);
  Tensor kv(DType::fp8_e4m3fn, {rr.N, D}), kvs(DType::f32, {rr.N});
  make_keys(root, kKv, rr.N, D, threads, all_negative, kv.data<std::uint8_t>(), kvs.data<float>());
  c.inputs = {{"q", qb.q_fp8},
              {"kv", kv},
              {"kv_scale", kvs},
              {"weights", qb.weights},
              {"ks", Tensor::from_vector(DType::i32, {S}, rr.ks)},
              {"ke", Tensor::from_vector(DType::i32, {S}, rr.ke)}};
}

// Packed prefill batch: sequence i has prefix[i] cached keys (chunked prefill: ks > 0 for i > 0, rows start
// after the prefix) and rows[i] new query tokens; row t of sequence i sees keys [base_i, base_i + prefix_i + t].
RaggedRows prefill_rows(const GoldenSpec& s) {
  const auto prefix = list_or(s, "prefix", {0});
  const auto rows = list_or(s, "rows", {16});
  if (prefix.size() != rows.size()) throw std::invalid_argument(s.name + ": lists prefix and rows differ in length");
  RaggedRows rr;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto base = static_cast<std::int32_t>(rr.N);
    for (std::int64_t t = 0; t < rows[i]; ++t) {
      rr.ks.push_back(base);
      rr.ke.push_back(static_cast<std::int32_t>(base + prefix[i] + t + 1));
    }
    rr.N += prefix[i] + rows[i];
  }
  rr.N += s.dim("tail_keys", 0);  // keys no row may see
  return rr;
}

// Context parallelism (prev/next split): the sequence of 2*cp*chunk tokens is cut into 2*cp chunks; rank r
// holds chunk r ("prev") and chunk 2cp-1-r ("next"); its rows see keys [0, pos+1) of the gathered sequence.
RaggedRows cp_rows(const GoldenSpec& s) {
  const std::int64_t cp = s.dim("cp", 2), ch = s.dim("chunk", 8), rank = s.dim("rank", 0);
  RaggedRows rr;
  rr.N = 2 * cp * ch;
  for (std::int64_t part : {rank, 2 * cp - 1 - rank})
    for (std::int64_t t = 0; t < ch; ++t) {
      rr.ks.push_back(0);
      rr.ke.push_back(static_cast<std::int32_t>(part * ch + t + 1));
    }
  return rr;
}


}  // namespace

std::vector<Generator> generators() {
  return {
      {"logits.ragged_prefill", "indexer.logits_ragged",
       "packed prefill batch: sequence i has prefix[i] cached keys (chunked prefill, ks > 0) and rows[i] query rows, "
       "row t sees [base, base+prefix+t]; q/kv = act_quant(bf16 N(0,1)+outliers), W = fl32(fl32(w*q_scale)*128^-0.5). "
       "lists prefix, rows; dims H, D, tail_keys",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, prefill_rows(s), false); }},
      {"logits.ragged_cp_split", "indexer.logits_ragged",
       "context-parallel prev/next split: rank holds chunk rank and chunk 2cp-1-rank of a 2*cp*chunk sequence; rows "
       "see [0, pos]. dims cp, chunk, rank, H, D",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, cp_rows(s), false); }},
      {"logits.ragged_all_negative", "indexer.logits_ragged",
       "all pre-ReLU scores <= 0 (keys >= 0, q <= 0) on even rows: logits exactly 0 (+-0); odd rows keep every 8th "
       "head unconstrained. Same row layout as ragged_prefill",
       [](const GoldenSpec& s, std::uint64_t seed, int th, Case& c) { build_ragged(s, seed, th, c, prefill_rows(s), true); }}
  };
}

std::vector<GoldenSpec> goldens() {
  return {
      {.name = "ragged_nonfinite", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 406,
       .dims = {{"H", 32}, {"D", 64}, {"tail_keys", 2}}, .lists = {{"prefix", {0, 20}}, {"rows", {6, 6}}},
       .attrs = {{"clean_logits", I(1)}, {"logits_dtype", S("float32")}},
       .poison = {{"q", 2, 5, kNaN}, {"kv", 7, 0, kNaN}, {"weights", 3, 1, kInf}, {"kv_scale", 10, -1, kInf}, {"weights", 8, 0, kNaN}},
       .doc = "NaN policy: a NaN fp8 query element, a NaN key, +inf / NaN gates, an inf kv_scale: NaN and inf logits where IEEE says so"},
      {.name = "ragged_chunked_prefill", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 401,
       .dims = {{"tail_keys", 5}}, .lists = {{"prefix", {0, 190}}, {"rows", {12, 12}}},
       .attrs = {{"clean_logits", I(1)}, {"logits_dtype", S("float32")}},
       .doc = "two packed sequences, the second a chunked-prefill continuation (ks > 0, 190 cached keys); -inf mask"},
      {.name = "ragged_cp_split", .stage = "indexer.logits_ragged", .generator = "logits.ragged_cp_split", .seed = 402,
       .dims = {{"cp", 2}, {"chunk", 8}, {"rank", 0}}, .attrs = {{"clean_logits", I(0)}},
       .doc = "context-parallel rank 0: prev chunk 0 and next chunk 3 of a 32-token sequence, uncleaned logits"},
      {.name = "ragged_all_negative_bf16", .stage = "indexer.logits_ragged", .generator = "logits.ragged_all_negative", .seed = 403,
       .lists = {{"prefix", {40}}, {"rows", {8}}}, .attrs = {{"clean_logits", I(1)}, {"logits_dtype", S("bf16")}},
       .doc = "all pre-ReLU scores <= 0 on even rows (logits exactly 0), bf16 logits"},
      {.name = "ragged_h32_compressed", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 404,
       .dims = {{"H", 32}}, .lists = {{"prefix", {100}}, {"rows", {6}}},
       .attrs = {{"clean_logits", I(0)}, {"max_seqlen_k", I(128)}},
       .doc = "H = 32 (TP-sharded), compressed logits [S, max_seqlen_k] with column t = key ks+t"},
      {.name = "ragged_vllm_torch", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 407,
       .dims = {{"H", 64}, {"D", 128}, {"tail_keys", 3}}, .lists = {{"prefix", {0, 40}}, {"rows", {8, 8}}},
       .attrs = {{"clean_logits", I(1)}, {"logits_dtype", S("float32")}, {"kernel", S("vllm-torch")}},
       .doc = "kernel=vllm-torch: vLLM's fp8_mqa_logits_torch (bf16 head scores, fp32 scale / relu / weight / head "
              "sum): the fixed-order emulation's logits, judged by the derived per-logit bound (BITEXACT on a match)"},
      {.name = "ragged_long_context", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 405,
       .lists = {{"prefix", {16380}}, {"rows", {4}}}, .attrs = {{"clean_logits", I(0)}}, .committed = false,
       .doc = "decode-like rows over 16K keys (feed its logits to top-k: sparsity engaged); large, not committed"},
  };
}

}  // namespace dsa::indexer::logits_ragged
