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

// A record width that is not the declared layout's, with the layouts of that width named (a cache of another
// record is a real bug: B48 stores V4.1's window KV in the 584-byte V4 record).
std::string width_found(std::int64_t w, const std::string& lay) {
  std::vector<std::string> same;
  if (w == L::kRecord) same.push_back(L::kName);
  if (w == layouts::Model1KCache::kRecord) same.push_back(layouts::Model1KCache::kName);
  for (const auto& f : layouts::record_formats())
    if (f.record_bytes() == w) same.push_back(f.name);
  std::string s = std::to_string(w);
  if (same.empty()) return s;
  s += " (the width of ";
  for (std::size_t i = 0; i < same.size(); ++i) s += (i ? ", " : "") + same[i];
  s += ")";
  if (w == layouts::Model1KCache::kRecord && layouts::find_record(lay) && layouts::find_record(lay)->codec == layouts::RecCodec::mxfp8 && layouts::find_record(lay)->nope == 448)
    s += "; B48: the V4.1 window KV stored in the DeepSeek-V4 584-byte record (bf16 RoPE, 64-dim tiles) where " + lay + " is expected";
  if (const std::string b57 = layouts::record_width_bug(w, lay); !b57.empty()) s += "; " + b57;
  return s;
}

Params parse(const Case& c, const AttrReader& a, std::vector<Problem>& p) {
  Params r;
  r.layout.page_size = c.input("kv_cache_in").dim(1);
  const std::string lay = a.s("layout");
  r.model1 = lay == layouts::Model1KCache::kName;
  r.m1.page_size = r.layout.page_size;
  const layouts::RecordFormat* f = layouts::find_record(lay);
  r.record = f != nullptr;
  std::int64_t rec = r.model1 ? layouts::Model1KCache::kRecord : L::kRecord, nope = r.model1 ? layouts::Model1KCache::kNope : L::kNope;
  if (f) {
    rec = f->record_bytes();
    nope = f->nope;
    r.rp = layouts::parse_record_params(c, a, *f, r.layout.page_size, p);
  } else {
    for (const auto& at : layouts::record_attrs())
      if (a.has(at.name) && at.name != "scale_byte_max")
        p.push_back({c.file, c.name, "attr " + at.name, "not set: it applies to the kv record layouts, not to " + lay, a.s(at.name)});
    if (a.has("scale_byte_max"))
      p.push_back({c.file, c.name, "attr scale_byte_max", "not set: it applies to the ue8m0 kv record layouts, not to " + lay,
                   std::to_string(a.i("scale_byte_max"))});
    if (c.input("k_pe").dtype() != DType::bf16)
      p.push_back({c.file, c.name, "inputs/k_pe", "bf16 (layout " + lay + " stores the bf16 bits)", std::string(dtype_name(c.input("k_pe").dtype()))});
  }
  for (const auto* g : {&c.inputs, &c.outputs, &c.expected})
    for (const char* n : {"kv_cache_in", "kv_cache"})
      if (auto it = g->find(n); it != g->end() && it->second.rank() == 4 && it->second.dim(3) != rec)
        p.push_back({c.file, c.name, std::string(g == &c.inputs ? "inputs/" : g == &c.outputs ? "outputs/" : "expected/") + n,
                     std::to_string(rec) + "-byte records (layout " + lay + ")", width_found(it->second.dim(3), lay)});
  if (c.input("kv_c").dim(1) != nope)
    p.push_back({c.file, c.name, "inputs/kv_c", std::to_string(nope) + " NoPE dims per token (layout " + lay + ")",
                 std::to_string(c.input("kv_c").dim(1))});
  r.quant = quant::quant_params(c, a, true, p);
  if (f)  // goldens carry every attr's default: only a value other than the default is an error here
    for (const AttrSpec& q : {quant::scale_fmt_attr("pow2"), quant::amax_eps_attr(), quant::eps_on_attr(), quant::scale_apply_attr()}) {
      if (!a.has(q.name) || !q.default_value) continue;
      const bool is_default = q.type == AttrType::number ? a.f(q.name) == std::get<double>(*q.default_value)
                                                         : a.s(q.name) == std::get<std::string>(*q.default_value);
      if (!is_default)
        p.push_back({c.file, c.name, "attr " + q.name,
                     "its default: it is the fp8 tile scale rule of mla_fp8_656 / model1_fp8_584, and " + std::string(f->name) +
                         " takes its codec's rule attrs (mxfp8_rule, nvfp4_rule, mxfp4_rule, e2m1_*)",
                     q.type == AttrType::number ? std::to_string(a.f(q.name)) : a.s(q.name)});
    }
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

// The kv record writers' real bugs, each the whole cache a writer with it produces (cpu_record): `check` names the one
// a failing cache matches.
std::vector<Hypothesis> record_hypotheses() {
  using B = RecordBug;
  return bug_hints<B>("kv_cache", {
      {B::rope_fp32, "B49", "the RoPE dims quantized from the unrounded fp32 rotary output where the dump declares the bf16 source (REF)"},
      {B::tie_flip, "B50", "e2m1 midpoints rounded the other way (DeepGEMM's utility rounds half down; PTX cvt.rn, the REF and FlashMLA to even)"},
      {B::zero_flip, "B51", "the other sign of a zero e2m1 code (0x8 <-> 0x0: FlashMLA's test and PTX keep the sign, DeepGEMM's utility clears it)"},
      {B::nibbles_swapped, "B52", "the two e2m1 nibbles of every code byte swapped (dim 2i belongs in the low nibble)"},
      {B::codes_unrounded_scale, "B53", "codes divided by the unrounded scale while the stored scale byte is the rounded one"},
      {B::scatter_row_offset, "B55", "token i of the batch stored at slot + i: the multi-row scatter added the source row offset"},
      {B::order_swapped, "v41 §2.3", "page_segregated and token_interleaved record orders confused"},
      {B::scales_unpermuted, "v41 §2.4", "the 352-byte record's scales stored in natural order (scale s belongs at byte 8*(s&3)+(s>>2))"},
      {B::mx4_floor_1e4, "B54", "the MXFP4 amax floor 1e-4 (vLLM before #41015) where the floor is 6*2^-126: blocks below 1e-4 get scale 2^-15 and zero codes"},
  }, [](Hypothesis& x, B bug) {
    x.bytes = [bug](const Case& c, const dsa::Params& pp) -> std::optional<Tensor> {
      const auto& p = dynamic_cast<const Params&>(pp);
      if (!p.record) return std::nullopt;
      const layouts::RecordFormat& f = *p.rp.rec.f;
      const bool fp4 = f.fp4();
      if ((bug == B::tie_flip || bug == B::zero_flip || bug == B::nibbles_swapped) && !fp4) return std::nullopt;
      if (bug == B::rope_fp32 && (c.input("k_pe").dtype() != DType::f32 || !p.rp.rope_bf16_source)) return std::nullopt;
      if (bug == B::order_swapped && f.nparts() < 2) return std::nullopt;
      if (bug == B::scales_unpermuted && f.scale_order != layouts::ScaleOrder::interleave4x8) return std::nullopt;
      if (bug == B::mx4_floor_1e4 && (f.codec != layouts::RecCodec::mxfp4 || p.rp.quant.mx4 != fp4core::Mx4Rule::ref)) return std::nullopt;
      return cpu_record(c, p, bug, 1).tensors.front().value;
    };
  });
}

}  // namespace

Stage stage() {
  using D = DType;
  Stage s;
  s.name = "mla.kcache_store";
  s.summary = "write [c | k_pe] tokens into the MLA cache: V3.2 656-byte records (FlashMLA FP8 with scale, vLLM fp8_ds_mla), V4 MODEL1, or the V4.1 / FP4 kv records (MXFP8, NVFP4, MXFP4)";
  s.spec = "v32 §6.3";
  s.formula = "kv_cache = kv_cache_in; for t with slot >= 0: per tile j of c (128 dims) s_j = scale rule(amax_j), codes e4m3(c / s_j), then the scales and the bf16 k_pe into the 656-byte record (or MODEL1 584-byte split); kv records: [c | k_pe] block-quantized by the record's codec into its regions";
  s.schema.attrs = {
      quant::scale_fmt_attr("pow2"), quant::eps_on_attr(), quant::scale_apply_attr(), quant::amax_eps_attr(), layouts::page_size_attr(),
      str_attr("layout", L::kName,
               [] {
                 std::vector<std::string> v{L::kName, layouts::Model1KCache::kName};
                 for (const auto& n : layouts::record_names()) v.push_back(n);
                 return v;
               }(),
               "cache byte layout: mla_fp8_656 (V3.2: 656-byte token records), model1_fp8_584 (DeepSeek-V4 / FlashMLA MODEL1: "
               "576-byte token records then 8-byte e8m0 scale records per block), or a kv record of layouts/kv_records.hpp "
               "(v41_mxfp8_528, v41_nvfp4_288, sglang_mxfp4_368, flashmla_nvfp4_352, nvfp4_384, nvfp4_432; and "
               "v41_idx_mxfp4_68 / v41_idx_fp8_132, the V4.1 indexer K cache (MXFP4, or its FP8 option): kv_c = dims 0..63, "
               "k_pe = the RoPE dims 64..127)")};
  for (auto& at : layouts::record_attrs()) s.schema.attrs.push_back(std::move(at));
  s.schema.inputs = {{"kv_c", {D::bf16}, {"T,?"}, false, "latent c per token (after kv_norm): 512 dims (mla_fp8_656, the 576-d records), 448 NoPE dims (model1_fp8_584, the V4 / V4.1 records)"},
                     {"k_pe", {D::bf16, D::f32}, {"T,64"}, false, "RoPE part per token (after rotary): bf16; f32 (the unrounded rotary output) for the kv records, quantized as given with quant_source fp32"},
                     {"slot_mapping", {D::i32, D::i64}, {"T"}, false, "cache slot page*page_size+offset per token; -1 = padded token, skipped"},
                     {"kv_cache_in", {D::u8}, {"P,page_size,1,rec"}, false, "cache bytes before the store (the layout's bytes per token: 656, 584, 528, 288, 368, 352, 384, 432, 68, 132)"}};
  s.schema.outputs = {{{"kv_cache", {D::u8}, {"P,page_size,1,rec"}, false, "cache bytes after the store"}, CompareKind::bytes}};
  s.parse = typed_parse(&parse);
  s.impl[static_cast<std::size_t>(Backend::cpu)] = typed_impl(&cpu);
#ifdef DSA_CUDA_BACKEND
  s.impl[static_cast<std::size_t>(Backend::cuda)] = typed_impl(&cuda);
#endif
  s.sanity = sanity;
  s.hypotheses = record_hypotheses();
  s.generators = generators();
  s.goldens = goldens();
  s.selftest = selftest_cases();
  s.mutants = mutants();
  return s;
}

}  // namespace dsa::mla::kcache_store
