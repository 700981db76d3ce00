// mla.kcache_store: schema, parse, the written-scale contract (B25), table entry.
#include <cmath>
#include <cstring>
#include <map>

#include "compare/detail.hpp"
#include "engines/quant/quant_attrs.hpp"
#include "layouts/layouts.hpp"
#include "stages/mla/kcache_store/stage.hpp"
#include "stages/mla/table.hpp"

namespace dsa::mla::kcache_store {

using L = layouts::MlaKCache;

namespace {

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.layout.page_size = c.input("kv_cache_in").dim(1);
  r.model1 = a.s("layout") == layouts::Model1KCache::kName;
  r.m1.page_size = r.layout.page_size;
  const std::int64_t rec = r.model1 ? layouts::Model1KCache::kRecord : L::kRecord, nope = r.model1 ? layouts::Model1KCache::kNope : L::kNope;
  for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
    for (const char* n : {"kv_cache_in", "kv_cache"})
      if (auto it = g->find(n); it != g->end() && it->second.rank() == 4 && it->second.dim(3) != rec)
        p.push_back({c.file, c.name, std::string(g == &c.inputs ? "inputs/" : g == &c.outputs ? "outputs/" : "expected/") + n,
                     std::to_string(rec) + "-byte records (layout " + a.s("layout") + ")", std::to_string(it->second.dim(3))});
  if (c.input("kv_c").dim(1) != nope)
    p.push_back({c.file, c.name, "inputs/kv_c", std::to_string(nope) + " NoPE dims per token (layout " + a.s("layout") + ")",
                 std::to_string(c.input("kv_c").dim(1))});
  r.quant = quant::quant_params(c, a, true, p);
  if (r.model1 && r.quant.scale.round != quant::ScaleRound::pow2)
    p.push_back({c.file, c.name, "attr scale_fmt", "a power-of-two rule (pow2 or ue8m0) with layout model1_fp8_584 (e8m0 scale bytes)",
                 a.s("scale_fmt")});
  check_slot_mapping(c, c.input("slot_mapping"), c.input("kv_cache_in").dim(0) * r.layout.page_size, "num_blocks*page_size", p);
  return r;
}

// B25: a written scale that is not a power of two is read differently by each FlashMLA reader (SM90 rounds it to
// bf16, SM100 to E8M0), so the decode does not see what the writer quantized with.
void sanity(const Case& c, const std::string& tensor, const Tensor& out, std::vector<std::string>& f) {
  if (tensor != "kv_cache" || out.rank() != 4 || out.dtype() != DType::u8 || out.dim(3) != L::kRecord) return;
  const Tensor* sm = c.input_opt("slot_mapping");
  const std::int64_t cap = out.dim(0) * out.dim(1);
  std::int64_t bad = 0, first = -1;
  float first_s = 0;
  for (std::int64_t i = 0; sm && i < sm->numel(); ++i) {
    const auto slot = sm->int_at(i);
    if (slot < 0 || slot >= cap) continue;
    const layouts::MlaToken tok{out.data<std::uint8_t>() + slot * L::kRecord};
    for (std::int64_t j = 0; j < L::kTiles; ++j) {
      const float s = tok.scale(j);
      std::uint32_t u;
      std::memcpy(&u, &s, 4);
      if (std::isfinite(s) && s > 0 && (u & 0x7FFFFFu) == 0 && (u >> 23) != 0) continue;
      if (first < 0) first = slot, first_s = s;
      ++bad;
    }
  }
  if (!bad) return;
  // The declared rule decides what this is: a pow2 rule that wrote other scales is the bug B25 names (a hint on the
  // failure); an fp32/bf16 rule writes such scales by design, and what a reader does with them is a note.
  const std::string fmt = c.has_attr("scale_fmt") ? c.attr_str("scale_fmt") : "pow2";
  const bool pow2_rule = fmt == "pow2" || fmt == "ue8m0";
  const std::string where = std::to_string(bad) + " written scale(s) are not positive powers of two (first: slot " +
                            std::to_string(first) + ", page " + std::to_string(first / out.dim(1)) + " token " +
                            std::to_string(first % out.dim(1)) + ", scale " + cmp::detail::exact(first_s) + ")";
  if (pow2_rule)
    f.push_back("B25: " + where + " although scale_fmt " + fmt + " writes powers of two; FlashMLA's SM90 decode rounds "
                "such scales to bf16 and SM100 to E8M0, so the reader does not dequantize with the scale the writer used");
  else
    f.push_back(std::string(kNotePrefix) + "scale_fmt " + fmt + " writes scales that are not powers of two (" +
                where + "): FlashMLA's SM90 decode rounds them to bf16 and SM100 to E8M0 (B25); the 2026 contract is pow2");
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = "mla.kcache_store";
  s.summary = "write [c | k_pe] tokens into the fp8 MLA cache: V3.2 656-byte records (FlashMLA FP8 with scale, vLLM fp8_ds_mla) or V4 MODEL1";
  s.spec = "v32 §6.3";
  s.formula = "kv_cache = kv_cache_in; for t with slot >= 0: per tile j of c (128 dims) s_j = scale rule(amax_j), codes e4m3(c / s_j), then the scales and the bf16 k_pe into the 656-byte record (or MODEL1 584-byte split)";
  s.schema.attrs = {
      quant::scale_fmt_attr("pow2"), quant::eps_on_attr(), quant::scale_apply_attr(), quant::amax_eps_attr(), layouts::page_size_attr(),
      str_attr("layout", L::kName, {L::kName, layouts::Model1KCache::kName},
               "cache byte layout: mla_fp8_656 (V3.2: 656-byte token records) or model1_fp8_584 (DeepSeek-V4 / FlashMLA MODEL1: "
               "576-byte token records then 8-byte e8m0 scale records per block)")};
  s.schema.inputs = {{"kv_c", {D::bf16}, {"T,?"}, false, "latent c per token (after kv_norm): 512 dims (mla_fp8_656), 448 NoPE dims (model1_fp8_584)"},
                     {"k_pe", {D::bf16}, {"T,64"}, false, "RoPE part per token (after rotary), stored unquantized"},
                     {"slot_mapping", {D::i32, D::i64}, {"T"}, false, "cache slot page*page_size+offset per token; -1 = padded token, skipped"},
                     {"kv_cache_in", {D::u8}, {"P,page_size,1,rec"}, false, "cache bytes before the store (656 or 584 bytes per token: attr layout)"}};
  s.schema.outputs = {{{"kv_cache", {D::u8}, {"P,page_size,1,rec"}, false, "cache bytes after the store"}, CompareKind::bytes}};
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

}  // namespace dsa::mla::kcache_store
