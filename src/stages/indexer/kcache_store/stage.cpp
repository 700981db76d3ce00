// indexer.kcache_store: schema, parse, the written-scale sanity check (B5), table entry.
#include <cmath>
#include <map>

#include "layouts/layouts.hpp"
#include "stages/indexer/attrs.hpp"
#include "stages/indexer/kcache_store/stage.hpp"
#include "stages/indexer/table.hpp"

namespace dsa::indexer::kcache_store {

namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  const auto Dh = c.input("k_fp8").dim(1);
  const Tensor& cin = c.input("kv_cache_in");
  r.layout.page_size = cin.dim(1);
  r.layout.head_dim = Dh;
  const std::string name = a.s("layout");
  r.layout.order = layouts::indexer_kcache_order(name).value_or(layouts::KCacheOrder::planar);
  if (const std::string need = layouts::indexer_kcache_requirement(name, cin.dim(1), Dh); !need.empty())
    p.push_back({c.file, c.name, "attr layout", name + ": " + need, "page_size " + std::to_string(cin.dim(1)) + ", head_dim " + std::to_string(Dh)});
  if (cin.dim(3) != layouts::IndexerKCache::record_bytes(Dh))
    p.push_back({c.file, c.name, "inputs/kv_cache_in", "dim 3 = head_dim + 4 = " + std::to_string(layouts::IndexerKCache::record_bytes(Dh)),
                 std::to_string(cin.dim(3))});
  // Slots: -1 (padded token) or in [0, P*page_size), and distinct.
  check_slot_mapping(c, c.input("slot_mapping"), cin.dim(0) * cin.dim(1), "num_pages*page_size", p);
  return r;
}

// B5: every slot the store wrote must hold a finite positive scale.
void sanity(const Case& c, const std::string& tensor, const Tensor& out, std::vector<std::string>& f) {
  if (tensor != "kv_cache" || out.rank() != 4 || out.dtype() != DType::u8) return;
  const auto v = layouts::IndexerKCacheView::of(out);
  const Tensor* sm = c.input_opt("slot_mapping");
  std::int64_t bad = 0, first = -1;
  for (std::int64_t i = 0; sm && i < sm->numel(); ++i) {
    const auto slot = sm->int_at(i);
    if (slot < 0 || slot / v.layout.page_size >= v.num_pages) continue;
    const float s = v.scale(slot / v.layout.page_size, slot % v.layout.page_size);
    if (!(std::isfinite(s) && s > 0)) {
      if (first < 0) first = slot;
      ++bad;
    }
  }
  if (bad)
    f.push_back("B5: " + std::to_string(bad) + " written cache slot(s) hold a non-finite or non-positive scale; first slot " +
                std::to_string(first) + " (page " + std::to_string(first / v.layout.page_size) + " token " +
                std::to_string(first % v.layout.page_size) + ")");
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = "indexer.kcache_store";
  s.summary = "write k_fp8 + k_scale into the paged indexer K cache (planar pages of codes then scales; aiter layouts)";
  s.spec = "v32 §3.4";
  s.formula = "kv_cache = kv_cache_in; for t with slot = slot_mapping[t] >= 0: page slot / page_size, offset slot % page_size <- k_fp8[t] codes and k_scale[t] fp32 bytes (layout indexer_kcache_planar or aiter)";
  s.schema.attrs = {layouts::page_size_attr(), kcache_layout_attr()};
  s.schema.inputs = {{"k_fp8", {D::fp8_e4m3fn}, {"T,Dh"}, false, "quantized k per token"},
                     {"k_scale", {D::f32}, {"T"}, false, "k scale per token"},
                     {"slot_mapping", {D::i32, D::i64}, {"T"}, false, "cache slot page*page_size+offset per token; -1 = padded token, skipped"},
                     {"kv_cache_in", {D::u8}, {"P,page_size,1,?"}, false, "cache bytes before the store (attr layout)"}};
  s.schema.outputs = {{{"kv_cache", {D::u8}, {"P,page_size,1,?"}, false, "cache bytes after the store"}, CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::indexer::kcache_store
