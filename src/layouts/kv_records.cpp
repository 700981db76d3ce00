#include "layouts/kv_records.hpp"

#include <cstring>

#include "numerics/half_core.hpp"

namespace dsa::layouts {

namespace {
using K = RegionKind;
}

const std::vector<std::string>& record_order_names() {
  static const std::vector<std::string> v{"page_segregated", "token_interleaved"};
  return v;
}

std::optional<RecordOrder> parse_record_order(const std::string& s) {
  if (s == "page_segregated") return RecordOrder::page_segregated;
  if (s == "token_interleaved") return RecordOrder::token_interleaved;
  return std::nullopt;
}

const std::vector<RecordFormat>& record_formats() {
  static const std::vector<RecordFormat> v{
      {"v41_mxfp8_528",
       "DeepSeek-V4.1 window KV (FlashMLA ModelType::V41): 512 e4m3fn codes (RoPE dims quantized too), 16 ue8m0 scales of 32 dims (spec v41 §2.1)",
       448, 64, RecCodec::mxfp8, RopeStore::quantized, ScaleOrder::natural, {{{K::codes, 512, 0}, {K::scales, 16, 1}}}, 2, 512, false},
      {"v41_nvfp4_288",
       "DeepSeek-V4.1 compressed KV (FlashMLA ModelType::V41_FP4): 256 bytes of e2m1 codes (dim 2i low nibble), 32 e4m3fn scales of 16 dims (spec v41 §2.2)",
       448, 64, RecCodec::nvfp4, RopeStore::quantized, ScaleOrder::natural, {{{K::codes, 256, 0}, {K::scales, 32, 1}}}, 2, 512, false},
      {"sglang_mxfp4_368",
       "sglang's DeepSeek-V4 SM90 MXFP4 cache: 224 bytes of e2m1 NoPE codes, 14 ue8m0 scales of 32 dims + 2 pad, 64 bf16 RoPE (spec v41 §2.4)",
       448, 64, RecCodec::mxfp4, RopeStore::bf16, ScaleOrder::natural, {{{K::codes, 224}, {K::scales, 14}, {K::pad, 2}, {K::rope, 128}}}, 4, 0, true},
      {"flashmla_nvfp4_352",
       "vLLM FlashMLA #18 V3.2 NVFP4 cache (d 576): 256 bytes of e2m1 NoPE codes, 64 unscaled e4m3 RoPE, 32 e4m3 scales of 16 dims stored 4x8-interleaved (spec v41 §2.4)",
       512, 64, RecCodec::nvfp4, RopeStore::e4m3, ScaleOrder::interleave4x8, {{{K::codes, 256}, {K::rope, 64}, {K::scales, 32}}}, 3, 0, false},
      {"nvfp4_384",
       "FlashInfer's sparse-MLA nvfp4 cache (sglang DeepSeek-V4 on SM120): per page, each token's 224 bytes of e2m1 NoPE codes and 64 bf16 RoPE, then each token's 32-byte scale row (28 e4m3 scales of 16 dims, 4 zero bytes) (spec v41 §2.4; page_segregated)",
       448, 64, RecCodec::nvfp4, RopeStore::bf16, ScaleOrder::natural, {{{K::codes, 224, 0}, {K::rope, 128, 0}, {K::scales, 28, 1}, {K::pad, 4, 1}}}, 4, 0, false},
      {"v41_idx_mxfp4_68",
       "DeepSeek-V4.1 indexer K cache (vLLM indexer_k_store, DeepGEMM fp8_fp4 logits): per page the tokens' 64 bytes of e2m1 codes of the 128 dims (RoPE dims 64..127 quantized too), then their 4 ue8m0 scales of 32 dims (spec v41 §5; page_segregated)",
       64, 64, RecCodec::mxfp4, RopeStore::quantized, ScaleOrder::natural, {{{K::codes, 64, 0}, {K::scales, 4, 1}}}, 2, 512, false},
      {"v41_idx_fp8_132",
       "DeepSeek-V4.1 indexer K cache, FP8 option: per page the tokens' 128 e4m3 codes (RoPE dims 64..127 quantized too), then their fp32 scales 2^e of the 128 dims (spec v41 §5; page_segregated; the bytes of V3.2's planar indexer cache)",
       64, 64, RecCodec::fp8, RopeStore::quantized, ScaleOrder::natural, {{{K::codes, 128, 0}, {K::scales, 4, 1}}}, 2, 0, false},
      {"nvfp4_432",
       "local-inference-lab vLLM NVFP4 cache (d 576): 256 bytes of e2m1 NoPE codes, 32 e4m3 scales of 16 dims, 16 pad, 64 bf16 RoPE (spec v41 §2.4)",
       512, 64, RecCodec::nvfp4, RopeStore::bf16, ScaleOrder::natural, {{{K::codes, 256}, {K::scales, 32}, {K::pad, 16}, {K::rope, 128}}}, 4, 0, false},
      {"nvfp4_432_v4",
       "local-inference-lab vLLM / b12x DeepSeek-V4 NVFP4 cache (d 512): 256 bytes of e2m1 codes of all 512 dims (RoPE dims 448..511 quantized too), 32 e4m3 scales of 16 dims, 16 pad, a bf16 copy of the 64 RoPE dims (read by the decode) (docs/research_fp4_records.md §4)",
       448, 64, RecCodec::nvfp4, RopeStore::both, ScaleOrder::natural, {{{K::codes, 256}, {K::scales, 32}, {K::pad, 16}, {K::rope, 128}}}, 4, 0, false},
  };
  return v;
}

std::string record_width_bug(std::int64_t found, const std::string& declared) {
  const RecordFormat* f = find_record(declared);
  if (!f || f->codec != RecCodec::nvfp4 || f->nope != 448) return "";
  for (const auto& g : record_formats())
    if (g.codec == RecCodec::nvfp4 && g.nope == 512 && g.record_bytes() == found)
      return std::string("B57: the 512-wide NVFP4 geometry of ") + g.name + " on DeepSeek-V4's 448-wide NoPE record " + declared +
             " (tokens past the first pages land in the wrong slots)";
  return "";
}

const RecordFormat* find_record(const std::string& name) {
  for (const auto& f : record_formats())
    if (name == f.name) return &f;
  return nullptr;
}

std::vector<std::string> record_names() {
  std::vector<std::string> n;
  for (const auto& f : record_formats()) n.push_back(f.name);
  return n;
}

int RecordFormat::record_bytes() const {
  int n = 0;
  for (int i = 0; i < nregions; ++i) n += regions[static_cast<std::size_t>(i)].bytes;
  return n;
}

int RecordFormat::region_index(RegionKind k) const {
  for (int i = 0; i < nregions; ++i)
    if (regions[static_cast<std::size_t>(i)].kind == k) return i;
  return -1;
}

int RecordFormat::region_start(int index) const {
  int n = 0;
  for (int i = 0; i < index; ++i) n += regions[static_cast<std::size_t>(i)].bytes;
  return n;
}

int RecordFormat::part_bytes(int part) const {
  int n = 0;
  for (int i = 0; i < nregions; ++i)
    if (regions[static_cast<std::size_t>(i)].part == part) n += regions[static_cast<std::size_t>(i)].bytes;
  return n;
}

int RecordFormat::part_start(int part) const {
  int n = 0;
  for (int p = 0; p < part; ++p) n += part_bytes(p);
  return n;
}

int RecordFormat::scale_of_pos(int pos) const {
  if (scale_order == ScaleOrder::natural) return pos < nscales() ? pos : -1;
  // pos = 8 * (s & 3) + (s >> 2): s & 3 = pos / 8, s >> 2 = pos % 8
  const int s = 4 * (pos % 8) + pos / 8;
  return s < nscales() ? s : -1;
}

std::int64_t KvRecord::region_offset(std::int64_t slot, int index) const {
  if (order == RecordOrder::token_interleaved) return slot * record_bytes() + f->region_start(index);
  const std::int64_t page = slot / page_size, t = slot % page_size;
  const int part = f->regions[static_cast<std::size_t>(index)].part;
  return page * page_bytes() + page_size * f->part_start(part) + t * f->part_bytes(part) + (f->region_start(index) - f->part_start(part));
}

std::string KvRecord::page_problem() const {
  if (page_size <= 0) return "page_size " + std::to_string(page_size) + " (must be positive)";
  if (f->tma == 0) return "";
  std::int64_t need = 1;  // the smallest page size whose page bytes are a multiple of the TMA row
  while ((need * record_bytes()) % f->tma != 0) ++need;
  if (page_bytes() % f->tma != 0)
    return std::string(f->name) + " with page_size " + std::to_string(page_size) + ": a page is " + std::to_string(page_bytes()) +
           " bytes, not a multiple of " + std::to_string(f->tma) + " (the kernels' TMA row): page_size must be a multiple of " +
           std::to_string(need);
  return "";
}

std::int64_t KvRecord::slot_of(std::int64_t byte) const {
  const std::int64_t page = byte / page_bytes(), in = byte % page_bytes();
  if (order == RecordOrder::token_interleaved) return page * page_size + in / record_bytes();
  std::int64_t seg = 0;
  for (int p = 0; p < f->nparts(); ++p) {
    const std::int64_t b = f->part_bytes(p);
    if (in < seg + page_size * b) return page * page_size + (in - seg) / b;
    seg += page_size * b;
  }
  return page * page_size + page_size - 1;  // not reached
}

std::string KvRecord::describe(std::int64_t byte) const {
  const std::int64_t page = byte / page_bytes(), in = byte % page_bytes();
  std::int64_t t = 0, off = 0;  // token, byte within the record
  if (order == RecordOrder::token_interleaved) {
    t = in / record_bytes();
    off = in % record_bytes();
  } else {
    std::int64_t seg = 0;
    for (int p = 0; p < f->nparts(); ++p) {
      const std::int64_t b = f->part_bytes(p);
      if (in < seg + page_size * b) {
        t = (in - seg) / b;
        off = f->part_start(p) + (in - seg) % b;
        break;
      }
      seg += page_size * b;
    }
  }
  int ri = 0;
  while (ri + 1 < f->nregions && off >= f->region_start(ri + 1)) ++ri;
  off -= f->region_start(ri);
  const std::string where = "page " + std::to_string(page) + " token " + std::to_string(t) + " ";
  const Region& rg = f->regions[static_cast<std::size_t>(ri)];
  switch (rg.kind) {
    case RegionKind::codes:
      if (!f->fp4())
        return where + "dim " + std::to_string(off) + " (e4m3 code, scale " + std::to_string(off / f->block()) + ")";
      return where + "dims " + std::to_string(2 * off) + "," + std::to_string(2 * off + 1) + " (e2m1 nibbles, scale " +
             std::to_string(2 * off / f->block()) + ")";
    case RegionKind::scales: {
      const int sbytes = f->scale_bytes();
      const int s = f->scale_of_pos(static_cast<int>(off / sbytes));
      if (s < 0) return where + "scale row pad byte " + std::to_string(off - f->nscales() * sbytes);
      const std::int64_t lo = static_cast<std::int64_t>(s) * f->block();
      return where + "scale " + std::to_string(s) + (sbytes > 1 ? " byte " + std::to_string(off % sbytes) : std::string()) + " (" +
             f->scale_format() + ", dims " + std::to_string(lo) + ".." + std::to_string(lo + f->block() - 1) + ")";
    }
    case RegionKind::rope: {
      const bool bf = f->rope_bf16();
      const std::int64_t d = bf ? off / 2 : off;
      return where + "rope dim " + std::to_string(d) + (bf ? " byte " + std::to_string(off % 2) + " (bf16)" : " (e4m3, unscaled)") +
             " = dim " + std::to_string(f->nope + d);
    }
    default: return where + "pad byte " + std::to_string(off);
  }
}

RecordQuant producer_quant(const RecordFormat& f) {
  RecordQuant q;
  const std::string n = f.name;
  if (n == "sglang_mxfp4_368") q.mx4 = fp4core::Mx4Rule::nearest;
  if (n == "flashmla_nvfp4_352") {
    q.nv4 = fp4core::Nv4Rule::flashmla352;
    q.e2m1.zero = fp4core::ZeroSign::lt_zero;
  }
  if (n == "nvfp4_384") q.nv4 = fp4core::Nv4Rule::flashinfer384;
  if (n == "nvfp4_432" || n == "nvfp4_432_v4") q.nv4 = fp4core::Nv4Rule::lil432;
  return q;
}

void store_record(const KvRecord& r, const float* x, std::int64_t slot, std::uint8_t* cache, const RecordQuant& q) {
  const RecordFormat& f = *r.f;
  std::uint8_t* codes = cache + r.region_offset(slot, f.region_index(RegionKind::codes));
  std::uint8_t* scales = cache + r.region_offset(slot, f.region_index(RegionKind::scales));
  const int B = f.block();
  for (int b = 0; b < f.nscales(); ++b) {
    std::uint8_t sb = 0;
    switch (f.codec) {
      case RecCodec::mxfp8: fp4core::mxfp8_block(x + B * b, codes + B * b, &sb, q.mx8, q.byte_max); break;
      case RecCodec::nvfp4: fp4core::nvfp4_block(x + B * b, codes + B * b / 2, &sb, q.nv4, q.e2m1); break;
      case RecCodec::mxfp4: fp4core::mxfp4_block(x + B * b, codes + B * b / 2, &sb, q.mx4, q.e2m1); break;
      case RecCodec::fp8: fp4core::mxfp8_block(x + B * b, codes + B * b, &sb, q.mx8, 255, B); break;
    }
    if (f.codec == RecCodec::fp8) {
      const float sc = fp4core::fp8_pow2_scale(x + B * b, B, sb);
      std::memcpy(scales + 4 * f.scale_pos(b), &sc, 4);  // little-endian hosts only (as the whole tool)
    } else {
      scales[f.scale_pos(b)] = sb;
    }
    if (q.codes_unrounded_scale) {  // B53: codes from the unrounded scale
      const float* xb = x + B * b;
      const float amax = fp8core::block_amax(xb, B);
      const float su = f.fp4() ? amax / 6.0f : amax / 448.0f;
      for (int i = 0; i < B; ++i) {
        const float v = su > 0.0f ? xb[i] / su : 0.0f;
        if (!f.fp4()) {
          codes[B * b + i] = fp8core::f32_to_e4m3(fp4core::clampf(v, -448.0f, 448.0f));
        } else {
          std::uint8_t& byte = codes[(B * b + i) / 2];
          const std::uint8_t nib = fp4core::f32_to_e2m1(fp4core::clampf(v, -6.0f, 6.0f), q.e2m1);
          byte = static_cast<std::uint8_t>(i % 2 ? (byte & 0x0F) | (nib << 4) : (byte & 0xF0) | nib);
        }
      }
    }
  }
  for (int i = 0; i < f.nregions; ++i) {
    const Region& rg = f.regions[static_cast<std::size_t>(i)];
    std::uint8_t* p = cache + r.region_offset(slot, i);
    if (rg.kind == RegionKind::pad) {
      if (!f.pad_untouched)
        for (int k = 0; k < rg.bytes; ++k) p[k] = 0;
    } else if (rg.kind == RegionKind::rope) {
      for (int d = 0; d < f.rope; ++d) {
        const float v = x[f.nope + d];
        if (f.rope_store == RopeStore::e4m3) {
          p[d] = q.rope_sat ? fp4core::f32_to_e4m3_sat(v) : fp8core::f32_to_e4m3(v);
        } else {
          const std::uint16_t h = halfcore::f32_to_bf16(v);
          p[2 * d] = static_cast<std::uint8_t>(h & 0xFF);
          p[2 * d + 1] = static_cast<std::uint8_t>(h >> 8);
        }
      }
    } else if (rg.kind == RegionKind::scales) {
      for (int k = 0; k < rg.bytes; ++k)
        if (f.scale_of_pos(k / f.scale_bytes()) < 0) p[k] = 0;
    }
  }
}

void load_record(const KvRecord& r, const std::uint8_t* cache, std::int64_t slot, float* out) {
  const RecordFormat& f = *r.f;
  const std::uint8_t* codes = cache + r.region_offset(slot, f.region_index(RegionKind::codes));
  const std::uint8_t* scales = cache + r.region_offset(slot, f.region_index(RegionKind::scales));
  for (int d = 0; d < f.qdims(); ++d) {
    if (f.codec == RecCodec::fp8) {
      float sc;
      std::memcpy(&sc, scales + 4 * f.scale_pos(d / f.block()), 4);
      out[d] = halfcore::e4m3_to_f32(codes[d]) * sc;
      continue;
    }
    const std::uint8_t sb = scales[f.scale_pos(d / f.block())];
    if (f.codec == RecCodec::mxfp8) {
      out[d] = halfcore::e4m3_to_f32(codes[d]) * fp4core::ue8m0_decode(sb);
    } else {
      const std::uint8_t nib = static_cast<std::uint8_t>((codes[d / 2] >> (4 * (d % 2))) & 0xF);
      out[d] = fp4core::e2m1_to_f32(nib) * (f.codec == RecCodec::nvfp4 ? halfcore::e4m3_to_f32(sb) : fp4core::ue8m0_decode(sb));
    }
  }
  if (f.rope_store == RopeStore::quantized) return;  // `both`: the bf16 copy replaces the RoPE dims' codes
  const std::uint8_t* p = cache + r.region_offset(slot, f.region_index(RegionKind::rope));
  for (int d = 0; d < f.rope; ++d)
    out[f.nope + d] = f.rope_store == RopeStore::e4m3 ? halfcore::e4m3_to_f32(p[d])
                                                      : halfcore::bf16_to_f32(static_cast<std::uint16_t>(p[2 * d] | (p[2 * d + 1] << 8)));
}

}  // namespace dsa::layouts

namespace dsa::layouts {

namespace {
const std::vector<std::string> kNv4{"ref", "vllm", "flashmla", "flashmla352", "vllm352", "flashinfer384", "lil432"};
const char* nv4_name(fp4core::Nv4Rule r) { return kNv4[static_cast<std::size_t>(r)].c_str(); }
}  // namespace

std::vector<AttrSpec> record_attrs() {
  return {
      opt_str_attr("record_order", record_order_names(),
                   "kv record layouts: page_segregated (a page holds every token's first part, then every token's second: "
                   "FlashMLA kv_cache_format.h, vLLM, sglang, FlashInfer) or token_interleaved (whole records); absent = "
                   "page_segregated"),
      opt_str_attr("mxfp8_rule", {"ref", "flashmla"},
                   "v41_mxfp8_528 scale: ref = 2^ceil(log2(max(amax, 1e-4) * fl32(1/448))) (REF, vLLM); flashmla = "
                   "2^ceil(log2(max(amax / 448, 1e-4))) (FlashMLA tests/quant.py); absent = ref"),
      AttrSpec{"scale_byte_max", AttrType::integer, false, std::nullopt, {}, "ue8m0 kv records: the largest scale byte written (254 on gfx950); absent = 255"},
      opt_str_attr("nvfp4_rule", kNv4,
                   "NVFP4 kv records' scale and code rule (numerics/fp4_core.hpp): ref (REF), vllm, flashmla (V4.1 "
                   "writers), flashmla352 / vllm352 (the 352-byte record's test and vLLM writer), flashinfer384, lil432; "
                   "absent = the record's producer"),
      opt_str_attr("mxfp4_rule", {"ref", "nearest", "ref_floor_1e4"},
                   "MXFP4 kv records' exponent: ref = ceil(log2(max(amax, 6*2^-126)/6)) (the V4.1 indexer), nearest = "
                   "round(log2(amax/6)) (sglang's 368-byte record), ref_floor_1e4 = ref with vLLM's old amax floor 1e-4 "
                   "(#41015); absent = the record's producer"),
      opt_str_attr("e2m1_tie", {"rne", "half_down"}, "FP4 kv records: e2m1 midpoints to even (PTX cvt.rn) or down (DeepGEMM's util)"),
      opt_str_attr("e2m1_zero", {"keep", "clear", "lt_zero"},
                   "FP4 kv records: the sign of a zero code: keep (sign bit: -0 and small negatives 0x8), clear (0x0), "
                   "lt_zero (x < 0: -0 gives 0x0; FlashMLA #18's test)"),
      opt_str_attr("e2m1_nan", {"zero", "max"}, "FP4 kv records: the code of a NaN (0, or 7 with its sign)"),
      opt_str_attr("rope_cast", {"e4m3", "e4m3_sat"},
                   "flashmla_nvfp4_352's unscaled e4m3 RoPE: e4m3 (torch: beyond 464 NaN; FlashMLA's test) or e4m3_sat "
                   "(+-448; vLLM's writer); absent = e4m3"),
      opt_str_attr("quant_source", {"bf16", "fp32"},
                   "kv records: the RoPE values quantized: rounded to bf16 first (REF; absent) or the fp32 k_pe as given "
                   "(vLLM's V4.1 writers)"),
  };
}

RecordParams parse_record_params(const Case& c, const AttrReader& a, const RecordFormat& f, std::int64_t page_size,
                                 std::vector<Problem>& p) {
  RecordParams r;
  r.rec.f = &f;
  r.rec.page_size = page_size;
  r.quant = producer_quant(f);
  auto bad = [&](const std::string& attr, const std::string& why) {
    p.push_back({c.file, c.name, "attr " + attr, why, a.s(attr)});
  };
  if (a.has("record_order")) r.rec.order = *parse_record_order(a.s("record_order"));
  const bool fp4 = f.fp4();
  if (a.has("mxfp8_rule")) {
    if (fp4) bad("mxfp8_rule", std::string("no mxfp8_rule: ") + f.name + " is not an MXFP8 or FP8 record");
    r.quant.mx8 = a.s("mxfp8_rule") == "flashmla" ? fp4core::Mx8Rule::flashmla : fp4core::Mx8Rule::ref;
  }
  if (a.has("scale_byte_max")) {
    const std::int64_t bm = a.i("scale_byte_max");
    if (f.codec == RecCodec::nvfp4 || f.codec == RecCodec::fp8)
      p.push_back({c.file, c.name, "attr scale_byte_max", std::string("no scale_byte_max: ") + f.name + " has " + f.scale_format() + " scales",
                   std::to_string(bm)});
    if (bm < 1 || bm > 255) p.push_back({c.file, c.name, "attr scale_byte_max", "1..255", std::to_string(bm)});
    r.quant.byte_max = static_cast<int>(bm < 1 || bm > 255 ? 255 : bm);
  }
  if (a.has("nvfp4_rule")) {
    if (f.codec != RecCodec::nvfp4) bad("nvfp4_rule", std::string("no nvfp4_rule: ") + f.name + " is not an NVFP4 record");
    for (std::size_t i = 0; i < kNv4.size(); ++i)
      if (a.s("nvfp4_rule") == kNv4[i]) r.quant.nv4 = static_cast<fp4core::Nv4Rule>(i);
  }
  if (a.has("mxfp4_rule")) {
    if (f.codec != RecCodec::mxfp4) bad("mxfp4_rule", std::string("no mxfp4_rule: ") + f.name + " is not an MXFP4 record");
    const std::string m = a.s("mxfp4_rule");
    r.quant.mx4 = m == "nearest" ? fp4core::Mx4Rule::nearest : m == "ref_floor_1e4" ? fp4core::Mx4Rule::ref_floor_1e4 : fp4core::Mx4Rule::ref;
  }
  for (const char* n : {"e2m1_tie", "e2m1_zero", "e2m1_nan"})
    if (a.has(n) && !fp4) bad(n, std::string("no ") + n + ": " + f.name + " holds no e2m1 codes");
  if (a.has("e2m1_tie")) r.quant.e2m1.tie = a.s("e2m1_tie") == "half_down" ? fp4core::Tie::half_down : fp4core::Tie::rne;
  if (a.has("e2m1_zero")) {
    const std::string z = a.s("e2m1_zero");
    r.quant.e2m1.zero = z == "clear" ? fp4core::ZeroSign::clear : z == "lt_zero" ? fp4core::ZeroSign::lt_zero : fp4core::ZeroSign::keep;
  }
  if (a.has("e2m1_nan")) r.quant.e2m1.nan = a.s("e2m1_nan") == "max" ? fp4core::NanCode::max : fp4core::NanCode::zero;
  if (a.has("rope_cast")) {
    if (f.rope_store != RopeStore::e4m3) bad("rope_cast", std::string("no rope_cast: ") + f.name + " stores no e4m3 RoPE");
    r.quant.rope_sat = a.s("rope_cast") == "e4m3_sat";
  }
  if (a.has("quant_source")) r.rope_bf16_source = a.s("quant_source") != "fp32";  // bf16-stored RoPE: the same bytes
  if (const std::string why = r.rec.page_problem(); !why.empty()) p.push_back({c.file, c.name, "attr page_size", "a page size the kernels take", why});
  return r;
}

std::string describe_record_params(const RecordParams& r) {
  const RecordFormat& f = *r.rec.f;
  std::string s = std::string(f.name) + " " + record_order_names()[static_cast<std::size_t>(r.rec.order)] + ", ";
  if (f.codec == RecCodec::mxfp8 || f.codec == RecCodec::fp8)
    s += std::string("mxfp8_rule ") + (r.quant.mx8 == fp4core::Mx8Rule::ref ? "ref" : "flashmla") +
         (f.codec == RecCodec::mxfp8 ? ", scale_byte_max " + std::to_string(r.quant.byte_max) : std::string());
  else if (f.codec == RecCodec::nvfp4)
    s += std::string("nvfp4_rule ") + nv4_name(r.quant.nv4);
  else
    s += std::string("mxfp4_rule ") + (r.quant.mx4 == fp4core::Mx4Rule::ref ? "ref" : r.quant.mx4 == fp4core::Mx4Rule::nearest ? "nearest" : "ref_floor_1e4");
  if (f.fp4()) {
    const auto& e = r.quant.e2m1;
    s += std::string(", e2m1 ") + (e.tie == fp4core::Tie::rne ? "rne" : "half_down") + " / " +
         (e.zero == fp4core::ZeroSign::keep ? "keep" : e.zero == fp4core::ZeroSign::clear ? "clear" : "lt_zero") + " / " +
         (e.nan == fp4core::NanCode::zero ? "zero" : "max");
  }
  if (f.rope_store == RopeStore::e4m3) s += r.quant.rope_sat ? ", rope_cast e4m3_sat" : ", rope_cast e4m3";
  if (f.rope_store != RopeStore::bf16) s += r.rope_bf16_source ? ", quant_source bf16" : ", quant_source fp32";  // codes of RoPE dims
  return s;
}

}  // namespace dsa::layouts
