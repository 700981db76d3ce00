#include "layouts/v41_records.hpp"

#include "numerics/half_core.hpp"

namespace dsa::layouts {

const std::vector<std::string>& record_order_names() {
  static const std::vector<std::string> v{"page_segregated", "token_interleaved"};
  return v;
}

std::optional<RecordOrder> parse_record_order(const std::string& s) {
  if (s == "page_segregated") return RecordOrder::page_segregated;
  if (s == "token_interleaved") return RecordOrder::token_interleaved;
  return std::nullopt;
}

std::int64_t V41Record::data_offset(std::int64_t slot) const {
  const std::int64_t page = slot / page_size, t = slot % page_size;
  return order == RecordOrder::page_segregated ? page * page_bytes() + t * data_bytes() : slot * record_bytes();
}

std::int64_t V41Record::scale_offset(std::int64_t slot) const {
  const std::int64_t page = slot / page_size, t = slot % page_size;
  return order == RecordOrder::page_segregated ? page * page_bytes() + page_size * data_bytes() + t * scale_bytes()
                                               : slot * record_bytes() + data_bytes();
}

std::string V41Record::page_problem() const {
  if (page_size <= 0) return "page_size " + std::to_string(page_size) + " (must be positive)";
  if (page_bytes() % 512 != 0)
    return std::string(name()) + " with page_size " + std::to_string(page_size) + ": a page is " + std::to_string(page_bytes()) +
           " bytes, not a multiple of 512 (the TMA stride): page_size must be a multiple of " +
           std::to_string(kind == Kind::mxfp8_528 ? 32 : 16);
  return "";
}

std::string V41Record::describe(std::int64_t byte) const {
  const std::int64_t page = byte / page_bytes(), in = byte % page_bytes();
  std::int64_t t, off;
  bool data;
  if (order == RecordOrder::page_segregated) {
    data = in < page_size * data_bytes();
    t = data ? in / data_bytes() : (in - page_size * data_bytes()) / scale_bytes();
    off = data ? in % data_bytes() : (in - page_size * data_bytes()) % scale_bytes();
  } else {
    t = in / record_bytes();
    off = in % record_bytes();
    data = off < data_bytes();
    if (!data) off -= data_bytes();
  }
  const std::string where = "page " + std::to_string(page) + " token " + std::to_string(t) + " ";
  if (!data) {
    const std::int64_t lo = off * block();
    return where + "scale " + std::to_string(off) + " (" + (kind == Kind::mxfp8_528 ? "ue8m0" : "e4m3") + ", dims " +
           std::to_string(lo) + ".." + std::to_string(lo + block() - 1) + ")";
  }
  if (kind == Kind::mxfp8_528) return where + "dim " + std::to_string(off) + " (e4m3 code, scale " + std::to_string(off / 32) + ")";
  return where + "dims " + std::to_string(2 * off) + "," + std::to_string(2 * off + 1) + " (e2m1 nibbles, scale " +
         std::to_string(2 * off / 16) + ")";
}

void v41_store_token(const V41Record& r, const float* x, std::int64_t slot, std::uint8_t* cache, const V41QuantOpts& o) {
  std::uint8_t* data = cache + r.data_offset(slot);
  std::uint8_t* scales = cache + r.scale_offset(slot);
  if (r.kind == V41Record::Kind::mxfp8_528) {
    for (int b = 0; b < 16; ++b) fp4core::mxfp8_block(x + 32 * b, data + 32 * b, scales + b, o.mx8, o.byte_max);
  } else {
    for (int b = 0; b < 32; ++b) fp4core::nvfp4_block(x + 16 * b, data + 8 * b, scales + b, o.nv4, o.e2m1);
  }
}

void v41_load_token(const V41Record& r, const std::uint8_t* cache, std::int64_t slot, float* out) {
  const std::uint8_t* data = cache + r.data_offset(slot);
  const std::uint8_t* scales = cache + r.scale_offset(slot);
  if (r.kind == V41Record::Kind::mxfp8_528) {
    for (int d = 0; d < 512; ++d) out[d] = halfcore::e4m3_to_f32(data[d]) * fp4core::ue8m0_decode(scales[d / 32]);
  } else {
    for (int d = 0; d < 512; ++d) {
      const std::uint8_t nib = static_cast<std::uint8_t>((data[d / 2] >> (4 * (d % 2))) & 0xF);
      out[d] = fp4core::e2m1_to_f32(nib) * halfcore::e4m3_to_f32(scales[d / 16]);
    }
  }
}

}  // namespace dsa::layouts
