// indexer.logits_paged: schema, parse, table entry.
#include "layouts/indexer_kcache.hpp"
#include "layouts/layouts.hpp"
#include "stages/indexer/attrs.hpp"
#include "engines/logits/logits_engine.hpp"
#include "profiles/profiles.hpp"
#include "stages/indexer/logits_paged/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::logits_paged {
namespace {

const char* kName = "indexer.logits_paged";

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.clean_logits = a.b("clean_logits");
  r.max_context_len = a.i("max_context_len");
  r.bf16 = a.s("logits_dtype") == "bf16";
  r.torch = a.profile() == &profiles::vllm_torch();
  const Tensor& kc = c.input("kv_cache");
  const auto Dh = c.input("q").dim(3);
  const std::string layout = a.s("layout");
  r.order = layouts::indexer_kcache_order(layout).value_or(layouts::KCacheOrder::planar);
  if (const std::string need = layouts::indexer_kcache_requirement(layout, kc.dim(1), Dh); !need.empty())
    p.push_back({c.file, c.name, "attr layout", layout + ": " + need, "page_size " + std::to_string(kc.dim(1)) + ", head_dim " + std::to_string(Dh)});
  check_logits_heads(c, "inputs/q", c.input("q").dim(2), Dh, p);
  if (kc.dim(3) != layouts::IndexerKCache::record_bytes(Dh))
    p.push_back({c.file, c.name, "inputs/kv_cache", "dim 3 = head_dim + 4 = " + std::to_string(layouts::IndexerKCache::record_bytes(Dh)),
                 std::to_string(kc.dim(3))});
  const Tensor& cl = c.input("context_lens");
  if (cl.rank() == 2 && r.clean_logits) p.push_back({c.file, c.name, "attr clean_logits", "0 with 2-D context_lens (DeepGEMM)", "1"});
  const Tensor& bt = c.input("block_table");
  // The page size the reference reads with is the cache's (dim 1); an attr page_size, when given, must agree (the
  // schema binds it): without one, the attr's default is not what the pages hold (fuzz finding: block-table
  // columns past ceil(L/64) unchecked, read out of bounds with 16-token pages).
  const auto P = kc.dim(0), ps = kc.dim(1), next_n = c.input("q").dim(1);
  if (ps <= 0) {
    p.push_back({c.file, c.name, "inputs/kv_cache", "dim 1 (page_size) > 0", std::to_string(ps)});
    return r;
  }
  if (a.has("page_size") && a.i("page_size") != ps)
    p.push_back({c.file, c.name, "attr page_size", "the cache's page size (inputs/kv_cache dim 1 = " + std::to_string(ps) + ")",
                 std::to_string(a.i("page_size"))});
  const std::int64_t per = cl.rank() == 2 ? cl.dim(1) : 1;
  if (r.max_context_len <= 0) p.push_back({c.file, c.name, "attr max_context_len", "> 0", std::to_string(r.max_context_len)});
  // The width of logits no stored tensor holds (inputs-only cases for `expect`, indexer.fused) is only an attr: the
  // reference's value, M and mask (and an emulation) must fit the memory budget. Stored logits are bounded by the
  // file (and streamed in row tiles by check).
  if (!c.outputs.count("logits") && !c.expected.count("logits"))
    check_reference_memory(c, static_cast<double>(c.input("q").dim(0) * next_n) * static_cast<double>(std::max<std::int64_t>(r.max_context_len, 0)) * 17.0,
                           "attr max_context_len", p);
  for (std::int64_t i = 0; i < cl.numel(); ++i)
    if (cl.data<std::int32_t>()[i] < 0) {
      p.push_back({c.file, c.name, "inputs/context_lens", ">= 0", "entry " + std::to_string(i) + ": " + std::to_string(cl.data<std::int32_t>()[i])});
      return r;
    }
  for (std::int64_t b = 0; b < bt.dim(0); ++b) {
    std::int64_t L = 0;
    for (std::int64_t t = 0; t < per; ++t) L = std::max<std::int64_t>(L, cl.data<std::int32_t>()[b * per + t]);
    // The row's columns [0, L) (1-D: the last MTP row sees L keys) must fit the logits width.
    if (L > r.max_context_len) {
      p.push_back({c.file, c.name, "attr max_context_len", ">= every request's context length (request " + std::to_string(b) + ": " +
                   std::to_string(L) + ")", std::to_string(r.max_context_len)});
      return r;
    }
    if (L < 0 || (cl.rank() == 1 && L > 0 && L < next_n)) {
      p.push_back({c.file, c.name, "inputs/context_lens", cl.rank() == 1 ? ">= next_n (or 0)" : ">= 0", "request " + std::to_string(b) + ": " + std::to_string(L)});
      return r;
    }
    const auto pages = (L + ps - 1) / ps;
    if (pages > bt.dim(1)) {
      p.push_back({c.file, c.name, "inputs/block_table",
                   "at least ceil(L/page_size) = " + std::to_string(pages) + " columns for request " + std::to_string(b), std::to_string(bt.dim(1))});
      return r;
    }
    for (std::int64_t j = 0; j < pages; ++j) {
      const auto pg = bt.data<std::int32_t>()[b * bt.dim(1) + j];
      if (pg < 0 || pg >= P) {
        p.push_back({c.file, c.name, "inputs/block_table", "page ids in [0, " + std::to_string(P) + ")",
                     "request " + std::to_string(b) + " block " + std::to_string(j) + ": " + std::to_string(pg)});
        return r;
      }
    }
  }
  return r;
}

// Known bugs as values: logit f = (row r = b*next_n + t, column j = key position of request b).
std::optional<engines::logits::LogitOperands> operands(const Case& c, const Params& p, std::int64_t f) {
  const Tensor &q = c.input("q"), &bt = c.input("block_table"), &cl = c.input("context_lens");
  const auto kvv = layouts::IndexerKCacheView::of(c.input("kv_cache"), p.order);
  const std::int64_t NN = q.dim(1), H = q.dim(2), D = q.dim(3), MB = bt.dim(1), ps = kvv.layout.page_size;
  const std::int64_t r = f / p.max_context_len, j = f % p.max_context_len, b = r / NN, t = r % NN;
  if (j >= valid_columns(cl.data<std::int32_t>(), cl.rank() == 2, b, t, NN, p.max_context_len, MB * ps)) return std::nullopt;
  const std::int64_t page = bt.data<std::int32_t>()[b * MB + j / ps];
  if (page < 0 || page >= kvv.num_pages) return std::nullopt;
  engines::logits::LogitOperands o{q.data<std::uint8_t>() + r * H * D, c.input("weights").data<float>() + r * H, nullptr,
                          kvv.scale(page, j % ps), H, D};
  o.keep = std::make_shared<std::vector<std::uint8_t>>(static_cast<std::size_t>(D));
  kvv.layout.load(kvv.base, page, j % ps, o.keep->data());
  o.k = o.keep->data();
  return o;
}

}  // namespace

std::vector<TensorSpec> input_schema() {
  using D = DType;
  const std::vector<DType> kFP8{D::fp8_e4m3fn}, kF32{D::f32};
  return {{"q", kFP8, {"B,next_n,H,Dh"}, false, "fp8 queries"},
          {"kv_cache", {D::u8}, {"P,page_size,1,?"}, false, "fused paged cache in the byte layout of attr layout (§3.4)"},
          {"weights", kF32, {"B*next_n,H"}, false, "head gates, row b*next_n+t"},
          {"context_lens", {D::i32}, {"B", "B,next_n"}, false,
           "1-D: causal MTP rows see j <= L-next_n+t; 2-D: row (b,t) sees j < L[b,t]"},
          {"block_table", {D::i32}, {"B,?"}, false, "physical page ids per request"}};
}

Stage stage() {
  using D = DType;
  Stage s;
  s.name = kName;
  s.summary = "DeepGEMM fp8_paged_mqa_logits: decode/MTP logits over the paged fp8 K cache";
  s.spec = "v32 §3.3, §3.4, §3.5";
  s.formula = "logits[b*next_n+t, n] = fl32( kv_scale[n] * sum_h W[r,h] * relu(q[r,h,:] . k[n]) ) for n < context_lens[b] - next_n + t + 1, k read from the paged fp8 cache through block_table";
  s.default_tolerance = "sm90-fp8";
  s.schema.attrs = {bool_attr("clean_logits", false, "columns past the row's causal length are -inf (1-D context_lens only)"),
                    required_int_attr("max_context_len", "number of logits columns"), layouts::page_size_attr(), kcache_layout_attr(),
                    logits_dtype_attr()};  // + attr kernel (added by the table: deepgemm-sm90 emulates this stage)
  s.schema.inputs = input_schema();
  s.schema.outputs = {{{"logits", {D::f32, D::bf16}, {"B*next_n,max_context_len"}, false, "logits"}, CompareKind::bounded, false, true}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  s.hypotheses = engines::logits::logit_hypotheses<Params>(&operands);
  s.tiling = RowTiling{"logits", [](const Case& c, const dsa::Params&) { return c.input("q").dim(1); }};  // whole requests
  return s;
}

}  // namespace dsa::indexer::logits_paged
