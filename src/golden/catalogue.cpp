// The golden case catalogue (see catalogue.hpp). One row per case; the table IS the documentation
// (`dsa-check golden --list`, README section golden). Seeds are fixed: changing a row changes the committed
// goldens and their MANIFEST, which the reproducibility gate in scripts/test.sh then reports.
#include "golden/catalogue.hpp"

#include <sstream>
#include <stdexcept>

// The table uses designated initializers and leaves unused fields at their defaults on purpose.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace dsa::golden {
namespace {

AttrValue I(std::int64_t v) { return AttrValue{v}; }
AttrValue S(const char* v) { return AttrValue{std::string(v)}; }

std::vector<GoldenSpec> build() {
  std::vector<GoldenSpec> c = {
      // ---------------------------------------------------------------- indexer.quant (v32 §2.5)
      {.name = "quant_gaussian_outliers", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 101,
       .dims = {{"T", 64}, {"K", 512}}, .params = {{"outlier_p", 0.01}, {"zero_block_every", 16}},
       .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "bf16 activations with outliers (one outlier squashes its block into subnormal codes); zero blocks hit the 1e-4 amax clamp"},
      {.name = "quant_saturation_fp32_scales", .stage = "indexer.quant", .generator = "quant.fp8_saturation", .seed = 102,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("fp32_div")}, {"scale_apply", S("mul_inv")}},
       .doc = "amax/448 scales with x*fl32(1/s): products just above 448 must be clamped (DeepGEMM test quantizer)"},
      {.name = "quant_saturation_ue8m0", .stage = "indexer.quant", .generator = "quant.fp8_saturation", .seed = 103,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "pow2 scales with amax at or near 448*2^e: codes 0x7E/0xFE at the top of the range"},
      {.name = "quant_subnormal", .stage = "indexer.quant", .generator = "quant.subnormal", .seed = 104,
       .dims = {{"T", 32}, {"K", 256}}, .attrs = {{"scale_fmt", S("ue8m0")}},
       .doc = "e4m3 subnormal codes and underflow to 0, tie rounding at 2^-9 quanta; blocks below the amax clamp"},
      {.name = "quant_f32_input_fp32_mul", .stage = "indexer.quant", .generator = "quant.gaussian_outliers", .seed = 105,
       .dims = {{"T", 16}, {"K", 256}}, .params = {{"f32_input", 1}, {"outlier_p", 0.02}},
       .attrs = {{"scale_fmt", S("fp32_mul")}},
       .doc = "fp32 input, demo scale_fmt=None: s = fl32(amax*fl32(1/448)), not pow2, so x/s rounds"},
      // ---------------------------------------------------------------- indexer.prolog (v32 §2.1-2.6)
      {.name = "prolog_neox_hadamard", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 201,
       .dims = {{"T", 12}, {"start_pos", 4090}}, .attrs = {{"rope_layout", S("neox")}, {"hadamard", I(1)}},
       .doc = "V3.2 demo path: LayerNorm k, NeoX RoPE (YaRN tables, positions across 4096), Hadamard-128, ue8m0 act_quant"},
      {.name = "prolog_interleaved_no_hadamard", .stage = "indexer.prolog", .generator = "prolog.gaussian", .seed = 202,
       .dims = {{"T", 8}, {"start_pos", 0}}, .attrs = {{"rope_layout", S("interleaved")}, {"hadamard", I(0)}},
       .doc = "engine variants: interleaved RoPE (GLM-5 style / the pre-fix demo bug) and no Hadamard (vLLM)"},
      // ---------------------------------------------------------------- indexer.kcache_store (v32 §3.4)
      {.name = "kcache_shuffled_padded", .stage = "indexer.kcache_store", .generator = "kcache.shuffled_slots", .seed = 301,
       .dims = {{"T", 150}, {"P", 4}}, .params = {{"pad_frac", 0.1}}, .attrs = {{"page_size", I(64)}},
       .doc = "shuffled slots over 4 pages, padded tokens (slot -1), poisoned cache bytes that must survive"},
      // ---------------------------------------------------------------- indexer.logits_ragged (v32 §3.2)
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
      {.name = "ragged_long_context", .stage = "indexer.logits_ragged", .generator = "logits.ragged_prefill", .seed = 405,
       .lists = {{"prefix", {16380}}, {"rows", {4}}}, .attrs = {{"clean_logits", I(0)}}, .committed = false,
       .doc = "decode-like rows over 16K keys (feed its logits to top-k: sparsity engaged); large, not committed"},
      // ---------------------------------------------------------------- indexer.logits_paged (v32 §3.3)
      {.name = "paged_decode_n1", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 501,
       .dims = {{"next_n", 1}}, .lists = {{"context_lens", {1, 64, 65, 200, 0}}}, .attrs = {{"clean_logits", I(1)}},
       .doc = "decode, lengths 1/64/65/200 and an empty request, shuffled sparse block table, poisoned page tails"},
      {.name = "paged_mtp_n2_2d", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 502,
       .dims = {{"next_n", 2}}, .lists = {{"context_lens", {130, 7, 256}}}, .params = {{"context_lens_2d", 1}},
       .attrs = {{"clean_logits", I(0)}},
       .doc = "MTP next_n = 2 with 2-D per-row context_lens (vLLM / sglang expanded lengths), uncleaned"},
      {.name = "paged_mtp_n4", .stage = "indexer.logits_paged", .generator = "logits.paged_mtp", .seed = 503,
       .dims = {{"next_n", 4}}, .lists = {{"context_lens", {4, 300, 129}}}, .attrs = {{"clean_logits", I(1)}},
       .doc = "MTP next_n = 4, 1-D causal lengths (row t sees j <= L-4+t), one request of exactly next_n tokens"},
      // ---------------------------------------------------------------- indexer.topk (v32 §5)
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
  return c;
}

}  // namespace

const std::vector<std::int64_t>& GoldenSpec::list(const std::string& k) const {
  auto it = lists.find(k);
  if (it == lists.end()) throw std::invalid_argument("golden case '" + name + "': missing list '" + k + "'");
  return it->second;
}

const std::vector<GoldenSpec>& catalogue() {
  static const std::vector<GoldenSpec> all = build();
  return all;
}

const GoldenSpec* find_spec(const std::string& name) {
  for (const auto& s : catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

std::string shapes_str(const GoldenSpec& s) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [k, v] : s.dims) {
    o << (first ? "" : " ") << k << "=" << v;
    first = false;
  }
  for (const auto& [k, v] : s.lists) {
    o << (first ? "" : " ") << k << "=[";
    for (std::size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
    o << "]";
    first = false;
  }
  return o.str();
}

std::string options_str(const GoldenSpec& s) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [k, v] : s.attrs) {
    std::string str = attr_to_string(v);
    if (str.size() >= 2 && str.front() == '"') str = str.substr(1, str.size() - 2);
    o << (first ? "" : " ") << k << "=" << str;
    first = false;
  }
  for (const auto& [k, v] : s.params) {
    std::ostringstream x;
    x << v;
    o << (first ? "" : " ") << k << "=" << x.str();
    first = false;
  }
  return o.str();
}

}  // namespace dsa::golden
