// The quantized KV records of DeepSeek-V4 / V4.1 sparse attention caches beyond MODEL1 (spec v41_fp4.md §2, §3;
// docs/research_fp4_records.md for the sources): one named, table-driven description per record, shared by the
// writer (mla.kcache_store), the readers and the numpy model reference/kv_records.py.
//
// A record holds one token: `nope` dims quantized by the record's codec, then `rope` dims either quantized with them
// (the V4.1 FlashMLA records: all 512 dims in one codec row) or stored beside them (bf16, or unscaled e4m3). Its
// bytes are regions in a fixed order:
//   codes   the codec's codes: MXFP8 one e4m3 byte per dim; NVFP4 / MXFP4 two e2m1 nibbles per byte (dim 2i in the low
//           nibble, 2i+1 in the high one; nibble = 8*sign + index into {0, .5, 1, 1.5, 2, 3, 4, 6})
//   scales  one byte per block (MXFP8 / MXFP4: ue8m0 per 32 dims; NVFP4: e4m3 per 16 dims; FP8: four, the fp32 value
//           2^e of a 128-dim block, little-endian), in natural order or the
//           352-byte record's 4x8 interleave (scale s at byte 8*(s & 3) + (s >> 2)); bytes past the last scale of a
//           wider scale row are pad
//   rope    the rope dims when not quantized with the codes: 2 bytes each (bf16, little-endian) or 1 (e4m3, no scale)
//   pad     bytes no value lives in
//
// Regions are grouped into parts (| below); a part is what a page_segregated page stores contiguously per token.
//   record              tok B   dims (nope+rope)   parts: regions                             codec (producer), who
//   v41_mxfp8_528       528     448+64 quantized   codes 512 | scales 16                      MXFP8 (ref): FlashMLA ModelType::V41 (window KV)
//   v41_nvfp4_288       288     448+64 quantized   codes 256 | scales 32                      NVFP4 (ref): FlashMLA ModelType::V41_FP4 (compressed KV)
//   sglang_mxfp4_368    368     448+64 bf16        codes 224, scales 14, pad 2, rope 128      MXFP4 (nearest): sglang V4 on SM90; pad never written
//   flashmla_nvfp4_352  352     512+64 e4m3        codes 256, rope 64, scales 32 (4x8)        NVFP4 (flashmla352): vLLM FlashMLA #18 (V3.2)
//   nvfp4_384           384     448+64 bf16        codes 224, rope 128 | scales 28, pad 4     NVFP4 (flashinfer384): FlashInfer / sglang V4 SM120
//   nvfp4_432           432     512+64 bf16        codes 256, scales 32, pad 16, rope 128     NVFP4 (lil432): local-inference-lab vLLM (576-d)
//   nvfp4_432_v4        432     448+64 both        codes 256, scales 32, pad 16, rope 128     NVFP4 (lil432): its DeepSeek-V4 writer (RoPE dims
//                                                                                            quantized too, and a bf16 copy the reader uses)
//   v41_idx_mxfp4_68    68      64+64 quantized    codes 64 | scales 4                        MXFP4 (ref): the V4.1 indexer K cache (vLLM indexer_k_store)
//   v41_idx_fp8_132     132     64+64 quantized    codes 128 | scales 4                       FP8 (ref): its FP8 option, one fp32 2^e scale per token
//
// Page orders (a dump attr: the sources disagree for the V4.1 records, spec §2.3): page_segregated = a page of P
// tokens holds part 0 of every token, then part 1 of every token (token t's part p at page_start + P * (bytes of the
// parts before p) + t * bytes(p)); token_interleaved = whole records one after another. A page is P * record bytes
// either way; a one-part record is the same in both orders.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "numerics/fp4_core.hpp"
#include "schema/schema.hpp"
#include "tensor/case.hpp"

namespace dsa::layouts {

enum class RecordOrder { page_segregated, token_interleaved };
const std::vector<std::string>& record_order_names();  // in enum order
std::optional<RecordOrder> parse_record_order(const std::string& s);

// fp8: the MXFP8 rule over 128-dim blocks, the scale stored as fp32 (fp4core::fp8_pow2_scale): the V4.1 indexer's
// FP8 K cache option [P x 128 e4m3 | P x 4 B fp32 2^e] (spec v41 §5), the byte format of V3.2's planar indexer cache.
enum class RecCodec : std::uint8_t { mxfp8, nvfp4, mxfp4, fp8 };
// both: quantized with the codes and a bf16 copy beside them (the 432-byte record's V4 writer); readers take the copy.
enum class RopeStore : std::uint8_t { quantized, bf16, e4m3, both };
enum class RegionKind : std::uint8_t { codes, scales, rope, pad };
enum class ScaleOrder : std::uint8_t { natural, interleave4x8 };

struct Region {
  RegionKind kind = RegionKind::pad;
  int bytes = 0;
  int part = 0;  // 0 or 1, non-decreasing along a record
};

struct RecordFormat {
  const char* name;
  const char* doc;  // one line: who writes it, what it holds
  int nope, rope;
  RecCodec codec;
  RopeStore rope_store;
  ScaleOrder scale_order;
  std::array<Region, 5> regions;
  int nregions;
  int tma;            // the kernels' TMA row: page bytes a multiple of it (0: no rule)
  bool pad_untouched;  // the writer never stores the pad bytes (they keep the cache's previous bytes); else written 0

  int dim() const { return nope + rope; }
  int qdims() const { return rope_store == RopeStore::quantized || rope_store == RopeStore::both ? nope + rope : nope; }  // dims in the codec row
  int block() const { return codec == RecCodec::nvfp4 ? 16 : codec == RecCodec::fp8 ? 128 : 32; }
  int nscales() const { return qdims() / block(); }
  int scale_bytes() const { return codec == RecCodec::fp8 ? 4 : 1; }  // bytes of one scale
  bool fp4() const { return codec == RecCodec::nvfp4 || codec == RecCodec::mxfp4; }  // e2m1 nibbles (else one e4m3 byte a dim)
  int code_bytes() const { return fp4() ? qdims() / 2 : qdims(); }
  bool rope_bf16() const { return rope_store == RopeStore::bf16 || rope_store == RopeStore::both; }  // a bf16 RoPE region
  int rope_bytes() const { return rope_bf16() ? 2 * rope : rope_store == RopeStore::e4m3 ? rope : 0; }
  int record_bytes() const;
  int region_index(RegionKind k) const;      // -1 when absent
  int region_start(int index) const;         // bytes of the regions before it, within a record
  int part_bytes(int part) const;            // bytes of one token's part
  int part_start(int part) const;            // bytes of the parts before it, within a record
  int nparts() const { return regions[static_cast<std::size_t>(nregions - 1)].part + 1; }
  // where in the scale region scale s lives, in scales (natural: s; interleave4x8: 8 * (s & 3) + (s >> 2))
  int scale_pos(int s) const { return scale_order == ScaleOrder::interleave4x8 ? 8 * (s & 3) + (s >> 2) : s; }
  int scale_of_pos(int pos) const;           // inverse of scale_pos; -1 for a pad scale of the scale region
  const char* scale_format() const { return codec == RecCodec::nvfp4 ? "e4m3" : codec == RecCodec::fp8 ? "fp32 2^e" : "ue8m0"; }
};

const std::vector<RecordFormat>& record_formats();
// A known bug a cache of `found` bytes per token shows where record `declared` is expected, or "": B57 (a 512-wide
// NVFP4 record's geometry, 352 / 432 B, on V4's 448-wide NoPE record, rtx6kpro #22).
std::string record_width_bug(std::int64_t found, const std::string& declared);
const RecordFormat* find_record(const std::string& name);  // nullptr when unknown
std::vector<std::string> record_names();

// A record format in a cache: its page order and page size.
struct KvRecord {
  const RecordFormat* f = nullptr;
  RecordOrder order = RecordOrder::page_segregated;
  std::int64_t page_size = 64;

  std::int64_t record_bytes() const { return f->record_bytes(); }
  std::int64_t page_bytes() const { return record_bytes() * page_size; }
  // byte offset of region `index` of token `slot`
  std::int64_t region_offset(std::int64_t slot, int index) const;
  // The page size the kernels accept, or why not ("" when fine).
  std::string page_problem() const;
  // What a cache byte is: "page 3 token 17 dim 40 (e4m3 code, scale 1)", "page 3 token 17 dims 6,7 (e2m1 nibbles,
  // scale 0)", "page 3 token 17 scale 5 (ue8m0, dims 160..191)", "page 3 token 17 rope dim 5 byte 0 (bf16)",
  // "page 3 token 17 pad byte 1".
  std::string describe(std::int64_t byte) const;
  std::int64_t slot_of(std::int64_t byte) const;  // the token a byte belongs to
};

// The quantizer options of a record writer (fp4_core.hpp: each a named producer rule).
struct RecordQuant {
  fp4core::Mx8Rule mx8 = fp4core::Mx8Rule::ref;
  int byte_max = 255;
  fp4core::Nv4Rule nv4 = fp4core::Nv4Rule::ref;
  fp4core::Mx4Rule mx4 = fp4core::Mx4Rule::ref;
  fp4core::E2m1Opts e2m1{};
  bool rope_sat = false;  // e4m3 RoPE (the 352-byte record): saturating cast (vLLM's writer) or not (FlashMLA's test)
  // A bug's variant, never a producer's (B53, kekzl/imp #250): the codes divided by the unrounded scale (amax / 448
  // for MXFP8, amax / 6 for the fp4 codecs, in fp32) while the stored scale byte is the rounded one.
  bool codes_unrounded_scale = false;
};

// The options a format's own producer uses (the record's writer in its source: docs/research_fp4_records.md).
RecordQuant producer_quant(const RecordFormat& f);

// Writes token `slot` (dim() fp32 values: nope then rope) into `cache` (the whole cache's bytes): its regions only;
// pad bytes inside the record are written 0.
void store_record(const KvRecord& r, const float* x, std::int64_t slot, std::uint8_t* cache, const RecordQuant& q);
// The dim() dequantized values of token `slot` (exact in bf16 for the codes; rope as stored: the bf16 copy where the
// RoPE dims are also quantized).
void load_record(const KvRecord& r, const std::uint8_t* cache, std::int64_t slot, float* out);

}  // namespace dsa::layouts

// ---- attrs of a stage that reads or writes these records (the writer mla.kcache_store; later the readers) ----
namespace dsa::layouts {

// Every option is optional: absent = the record's own producer (producer_quant, the record order its sources use).
//   record_order  page_segregated | token_interleaved          (two-part records; one-part records: either)
//   mxfp8_rule    ref | flashmla                               (v41_mxfp8_528, v41_idx_fp8_132)
//   scale_byte_max  255 | 254 (gfx950)                         (ue8m0 byte records)
//   nvfp4_rule    ref | vllm | flashmla | flashmla352 | vllm352 | flashinfer384 | lil432   (NVFP4 records)
//   mxfp4_rule    ref | nearest | ref_floor_1e4               (sglang_mxfp4_368, v41_idx_mxfp4_68)
//   e2m1_tie      rne | half_down;  e2m1_zero  keep | clear | lt_zero;  e2m1_nan  zero | max   (FP4 records)
//   rope_cast     e4m3 | e4m3_sat                              (flashmla_nvfp4_352: its e4m3 RoPE bytes)
//   quant_source  bf16 | fp32   the values quantized: the RoPE dims rounded to bf16 first (REF) or the fp32 values as
//                               given (vLLM's V4.1 writers; an f32 k_pe input)
std::vector<AttrSpec> record_attrs();
struct RecordParams {
  KvRecord rec;
  RecordQuant quant;
  bool rope_bf16_source = true;  // quant_source bf16
};
// The record of attr `layout` (a name of record_formats()), its order and options; problems name the attr and what
// it may be for this record.
RecordParams parse_record_params(const Case& c, const AttrReader& a, const RecordFormat& f, std::int64_t page_size,
                                 std::vector<Problem>& p);
// "nvfp4_rule flashmla352 (the record's producer), e2m1 rne / lt_zero / zero, page_segregated": for notes.
std::string describe_record_params(const RecordParams& r);

}  // namespace dsa::layouts
