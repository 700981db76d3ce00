// The DeepSeek-V4.1 KV records of FlashMLA (spec v41_fp4.md §2.1, §2.2; FlashMLA kv_cache_format.h, vLLM #56893 /
// #56935, sglang #39123), 512 dims per token (448 NoPE + 64 RoPE, RoPE dims quantized too):
//   v41_mxfp8_528  (ModelType::V41, the window KV)       512 e4m3fn codes + 16 ue8m0 scales, scale i covers dims 32i..32i+31
//   v41_nvfp4_288  (ModelType::V41_FP4, compressed KV)   256 bytes of e2m1 codes (byte i: dim 2i low nibble, 2i+1 high)
//                                                        + 32 e4m3fn scales in natural order, scale j covers dims 16j..16j+15
// in one of two orders, chosen by a dump attr (the sources disagree, §2.3):
//   page_segregated    a page of P tokens holds every token's data (token t at data*t), then every token's scales
//                      (token t at data*P + scale*t): FlashMLA kv_cache_format.h, vLLM, sglang
//   token_interleaved  per-token records [data | scales] (a later FlashMLA release as a third-party study describes it)
// A page is record*P bytes; the kernels' TMA needs it (and the data row) to be a multiple of 512 bytes: P a multiple
// of 32 for the 528-byte record, of 16 for the 288-byte one (checked as structure by the readers).
// Dequantized values are exact in bf16: MXFP8 e4m3(code) * 2^(byte - 127); NVFP4 e2m1 * e4m3(scale).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "numerics/fp4_core.hpp"

namespace dsa::layouts {

enum class RecordOrder { page_segregated, token_interleaved };
const std::vector<std::string>& record_order_names();  // in enum order
std::optional<RecordOrder> parse_record_order(const std::string& s);

struct V41Record {
  enum class Kind { mxfp8_528, nvfp4_288 };
  static constexpr const char* kMxfp8Name = "v41_mxfp8_528";
  static constexpr const char* kNvfp4Name = "v41_nvfp4_288";
  static constexpr std::int64_t kDim = 512;
  Kind kind = Kind::mxfp8_528;
  RecordOrder order = RecordOrder::page_segregated;
  std::int64_t page_size = 64;

  const char* name() const { return kind == Kind::mxfp8_528 ? kMxfp8Name : kNvfp4Name; }
  std::int64_t data_bytes() const { return kind == Kind::mxfp8_528 ? 512 : 256; }
  std::int64_t scale_bytes() const { return kind == Kind::mxfp8_528 ? 16 : 32; }
  std::int64_t record_bytes() const { return data_bytes() + scale_bytes(); }  // 528 | 288
  std::int64_t block() const { return kind == Kind::mxfp8_528 ? 32 : 16; }    // dims per scale
  std::int64_t page_bytes() const { return record_bytes() * page_size; }
  std::int64_t data_offset(std::int64_t slot) const;
  std::int64_t scale_offset(std::int64_t slot) const;
  // The page size the kernels accept (page bytes and data rows multiples of 512): "" or why not.
  std::string page_problem() const;
  // "page 3 token 17 dim 40 (e4m3 code, scale 1)", "page 3 token 17 dims 6,7 (e2m1 nibbles)", "page 3 token 17 scale 5
  // (ue8m0, dims 160..191)".
  std::string describe(std::int64_t byte) const;
};

// The quantizer options of a record writer (fp4_core.hpp: each a named producer rule).
struct V41QuantOpts {
  fp4core::Mx8Rule mx8 = fp4core::Mx8Rule::ref;
  int byte_max = 255;
  fp4core::Nv4Rule nv4 = fp4core::Nv4Rule::ref;
  fp4core::E2m1Opts e2m1{};
};

// Writes token `slot` (512 fp32 values, usually bf16-valued) into `cache` (the whole cache's bytes): its data and
// scale bytes only, nothing else.
void v41_store_token(const V41Record& r, const float* x, std::int64_t slot, std::uint8_t* cache, const V41QuantOpts& o);
// The 512 dequantized values of token `slot` (exact in bf16).
void v41_load_token(const V41Record& r, const std::uint8_t* cache, std::int64_t slot, float* out);

}  // namespace dsa::layouts
