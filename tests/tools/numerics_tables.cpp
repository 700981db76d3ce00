// dsa_numerics_tables: runs dsa-check's own conversions (src/numerics/formats.hpp) over a file of raw input
// bit patterns, so tests/python/test_numerics_exhaustive.py can compare them bit for bit with ml_dtypes/numpy.
//
//   dsa_numerics_tables SRC DST IN.bin OUT.bin
//
// SRC, DST: bf16 | fp16 | e4m3 | e5m2 | f32 | f64. IN holds little-endian raw bits of SRC, OUT receives raw bits
// of DST, one per input. Routes (the ones the library uses):
//   f64 -> X : f64_to_X (one RNE rounding from the double);  f64 -> f32 : static_cast<float>
//   f32 -> X : f32_to_X (f32_to_bf16 is the bit-trick fast path); f32 -> f64 : exact
//   low-precision -> X : decode with X_to_f32 (e4m3/e5m2: the 256-entry tables), then the f32 route.
// Every conversion is also recomputed through the exact double route (X_to_f64, f64_to_Y); the tool exits 3
// and names the first input where the two routes disagree (they must be bit-identical; for f32/f64 results a
// NaN of the same sign with another payload is accepted, see same_sign_nan).
// Exit 2 on usage / I/O errors.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "numerics/formats.hpp"
#include "numerics/fp4_core.hpp"
#include "layouts/kv_records.hpp"

namespace {

using namespace dsa::num;

enum class F { bf16, fp16, e4m3, e5m2, f32, f64, bad };

F parse(const std::string& s) {
  if (s == "bf16") return F::bf16;
  if (s == "fp16") return F::fp16;
  if (s == "e4m3") return F::e4m3;
  if (s == "e5m2") return F::e5m2;
  if (s == "f32") return F::f32;
  if (s == "f64") return F::f64;
  return F::bad;
}

std::size_t width(F f) {
  switch (f) {
    case F::e4m3:
    case F::e5m2: return 1;
    case F::bf16:
    case F::fp16: return 2;
    case F::f32: return 4;
    default: return 8;
  }
}

std::uint64_t load(const unsigned char* p, std::size_t w) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < w; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

void store(unsigned char* p, std::size_t w, std::uint64_t v) {
  for (std::size_t i = 0; i < w; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

double f64_of(std::uint64_t b) {
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

// f32 value -> DST bits through the library's float entry points.
std::uint64_t from_f32(float x, F dst) {
  switch (dst) {
    case F::bf16: return f32_to_bf16(x);
    case F::fp16: return f32_to_fp16(x);
    case F::e4m3: return f32_to_e4m3(x);
    case F::e5m2: return f32_to_e5m2(x);
    case F::f32: return f32_bits(x);
    default: return f64_bits(static_cast<double>(x));
  }
}

// double value -> DST bits through the library's double entry points.
std::uint64_t from_f64(double x, F dst) {
  switch (dst) {
    case F::bf16: return f64_to_bf16(x);
    case F::fp16: return f64_to_fp16(x);
    case F::e4m3: return f64_to_e4m3(x);
    case F::e5m2: return f64_to_e5m2(x);
    case F::f32: return f32_bits(static_cast<float>(x));
    default: return f64_bits(x);
  }
}

// The primary route (see the header comment).
std::uint64_t convert(std::uint64_t in, F src, F dst) {
  switch (src) {
    case F::f64: return from_f64(f64_of(in), dst);
    case F::f32: return from_f32(f32_from_bits(static_cast<std::uint32_t>(in)), dst);
    case F::bf16: return from_f32(bf16_to_f32(static_cast<std::uint16_t>(in)), dst);
    case F::fp16: return from_f32(fp16_to_f32(static_cast<std::uint16_t>(in)), dst);
    case F::e4m3: return from_f32(e4m3_to_f32(static_cast<std::uint8_t>(in)), dst);
    case F::e5m2: return from_f32(e5m2_to_f32(static_cast<std::uint8_t>(in)), dst);
    default: return 0;
  }
}

// The exact double route.
std::uint64_t convert_via_f64(std::uint64_t in, F src, F dst) {
  double x = 0.0;
  switch (src) {
    case F::f64: x = f64_of(in); break;
    case F::f32: x = static_cast<double>(f32_from_bits(static_cast<std::uint32_t>(in))); break;
    case F::bf16: x = bf16_to_f64(static_cast<std::uint16_t>(in)); break;
    case F::fp16: x = fp16_to_f64(static_cast<std::uint16_t>(in)); break;
    case F::e4m3: x = e4m3_to_f64(static_cast<std::uint8_t>(in)); break;
    case F::e5m2: x = e5m2_to_f64(static_cast<std::uint8_t>(in)); break;
    default: break;
  }
  return from_f64(x, dst);
}

// Both routes may carry a NaN payload differently only when the destination is f32/f64 (bf16 -> f32 is a bit
// shift that keeps a signalling payload; a double -> float cast quiets it). Sign and NaN-ness must agree.
bool same_sign_nan(std::uint64_t y, std::uint64_t z, F dst) {
  if (dst == F::f32) {
    const float a = f32_from_bits(static_cast<std::uint32_t>(y)), b = f32_from_bits(static_cast<std::uint32_t>(z));
    return a != a && b != b && ((y ^ z) >> 31) == 0;
  }
  if (dst == F::f64) {
    const double a = f64_of(y), b = f64_of(z);
    return a != a && b != b && ((y ^ z) >> 63) == 0;
  }
  return false;
}

}  // namespace

// fp4 mode: the V4.1 codecs of numerics/fp4_core.hpp over f32 inputs (little-endian), for
// tests/python/test_fp4_codecs.py to compare with reference/fp4_codecs.py bit for bit:
//   dsa_numerics_tables fp4 e2m1 TIE ZERO NAN IN OUT     one nibble byte per f32
//   dsa_numerics_tables fp4 mxfp8 RULE BYTE_MAX IN OUT   per 32 f32: 32 e4m3 codes, then 1 ue8m0 byte
//   dsa_numerics_tables fp4 nvfp4 RULE TIE ZERO IN OUT   per 16 f32: 8 packed bytes (element 2i low), 1 e4m3 byte
//   dsa_numerics_tables fp4 mxfp4 RULE TIE ZERO IN OUT   per 32 f32: 16 packed bytes, 1 ue8m0 byte
//   dsa_numerics_tables fp4 record KIND ORDER PAGE_SIZE IN OUT   IN: dim() f32 per slot (nope then rope; slots 0.. in
//       order); OUT: the whole cache (ceil(slots / PAGE_SIZE) pages, bytes no token writes 0xA5) written by
//       layouts::store_record with the record's producer options (layouts::producer_quant); KIND a record of
//       layouts::record_formats() (v41_mxfp8_528, v41_nvfp4_288, sglang_mxfp4_368, ...), ORDER page_segregated |
//       token_interleaved
// TIE rne|half_down, ZERO keep|clear|lt_zero, NAN zero|max (e2m1 only; the block modes use zero), RULE: mxfp8
// ref|flashmla, nvfp4 ref|vllm|flashmla|flashmla352|vllm352|flashinfer384|lil432, mxfp4 ref|nearest|ref_floor_1e4.
int fp4_main(int argc, char** argv) {
  using namespace dsa::fp4core;
  auto usage = [] {
    std::cerr << "usage: dsa_numerics_tables fp4 e2m1 TIE ZERO NAN IN OUT | mxfp8 RULE BYTE_MAX IN OUT | "
                 "nvfp4 RULE TIE ZERO IN OUT | mxfp4 RULE TIE ZERO IN OUT | record KIND ORDER PAGE_SIZE IN OUT\n";
    return 2;
  };
  if (argc < 3) return usage();
  const std::string kind = argv[2];
  const int nopt = kind == "mxfp8" ? 2 : 3;  // record: KIND ORDER PAGE_SIZE
  if (argc != 3 + nopt + 2) return usage();
  std::ifstream in(argv[3 + nopt], std::ios::binary);
  if (!in) return usage();
  const std::vector<unsigned char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> x(buf.size() / 4);
  std::memcpy(x.data(), buf.data(), x.size() * 4);
  auto tie = [&](const std::string& t) { return t == "half_down" ? Tie::half_down : Tie::rne; };
  auto zero = [&](const std::string& z) { return z == "clear" ? ZeroSign::clear : z == "lt_zero" ? ZeroSign::lt_zero : ZeroSign::keep; };
  auto nv4 = [&](const std::string& r) {
    const char* names[] = {"ref", "vllm", "flashmla", "flashmla352", "vllm352", "flashinfer384", "lil432"};
    for (int i = 0; i < 7; ++i)
      if (r == names[i]) return static_cast<Nv4Rule>(i);
    return Nv4Rule::ref;
  };
  std::vector<unsigned char> out;
  if (kind == "e2m1") {
    const E2m1Opts o{tie(argv[3]), zero(argv[4]), std::string(argv[5]) == "max" ? NanCode::max : NanCode::zero};
    for (float v : x) out.push_back(f32_to_e2m1(v, o));
  } else if (kind == "mxfp8") {
    const Mx8Rule r = std::string(argv[3]) == "flashmla" ? Mx8Rule::flashmla : Mx8Rule::ref;
    const int bmax = std::stoi(argv[4]);
    for (std::size_t b = 0; b + 32 <= x.size(); b += 32) {
      std::uint8_t codes[32], sb;
      mxfp8_block(x.data() + b, codes, &sb, r, bmax);
      out.insert(out.end(), codes, codes + 32);
      out.push_back(sb);
    }
  } else if (kind == "nvfp4" || kind == "mxfp4") {
    const E2m1Opts o{tie(argv[4]), zero(argv[5]), NanCode::zero};
    const std::string rule = argv[3];
    const std::size_t n = kind == "nvfp4" ? 16 : 32;
    for (std::size_t b = 0; b + n <= x.size(); b += n) {
      std::uint8_t packed[16], sb;
      if (kind == "nvfp4")
        nvfp4_block(x.data() + b, packed, &sb, nv4(rule), o);
      else
        mxfp4_block(x.data() + b, packed, &sb, rule == "nearest" ? Mx4Rule::nearest : rule == "ref_floor_1e4" ? Mx4Rule::ref_floor_1e4 : Mx4Rule::ref, o);
      out.insert(out.end(), packed, packed + n / 2);
      out.push_back(sb);
    }
  } else if (kind == "record") {  // record KIND ORDER PAGE_SIZE: IN holds dim() f32 per slot, slots 0.. in order
    const dsa::layouts::RecordFormat* f = dsa::layouts::find_record(argv[3]);
    if (!f) return usage();
    dsa::layouts::KvRecord r{f, std::string(argv[4]) == "token_interleaved" ? dsa::layouts::RecordOrder::token_interleaved
                                                                           : dsa::layouts::RecordOrder::page_segregated,
                             std::stoll(argv[5])};
    const std::int64_t slots = static_cast<std::int64_t>(x.size()) / f->dim();
    const std::int64_t pages = (slots + r.page_size - 1) / r.page_size;
    out.assign(static_cast<std::size_t>(pages * r.page_bytes()), 0xA5);  // bytes no token writes stay 0xA5
    const auto q = dsa::layouts::producer_quant(*f);
    for (std::int64_t s = 0; s < slots; ++s) dsa::layouts::store_record(r, x.data() + f->dim() * s, s, out.data(), q);
  } else {
    return usage();
  }
  std::ofstream o(argv[3 + nopt + 1], std::ios::binary);
  o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  return o ? 0 : 2;
}

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "fp4") return fp4_main(argc, argv);
  if (argc != 5 || parse(argv[1]) == F::bad || parse(argv[2]) == F::bad) {
    std::cerr << "usage: dsa_numerics_tables SRC DST IN.bin OUT.bin   (SRC, DST: bf16 fp16 e4m3 e5m2 f32 f64)\n";
    return 2;
  }
  const F src = parse(argv[1]), dst = parse(argv[2]);
  std::ifstream in(argv[3], std::ios::binary);
  if (!in) {
    std::cerr << "error: " << argv[3] << ": cannot read\n";
    return 2;
  }
  const std::vector<unsigned char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t wi = width(src), wo = width(dst);
  if (buf.size() % wi != 0) {
    std::cerr << "error: " << argv[3] << ": size " << buf.size() << " is not a multiple of " << wi << "\n";
    return 2;
  }
  const std::size_t n = buf.size() / wi;
  std::vector<unsigned char> out(n * wo);
  int rc = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t x = load(buf.data() + i * wi, wi);
    const std::uint64_t y = convert(x, src, dst);
    const std::uint64_t z = convert_via_f64(x, src, dst);
    if (y != z && !same_sign_nan(y, z, dst) && rc == 0) {
      std::fprintf(stderr, "route mismatch: %s 0x%llx -> %s: f32 route 0x%llx, f64 route 0x%llx\n", argv[1],
                   static_cast<unsigned long long>(x), argv[2], static_cast<unsigned long long>(y),
                   static_cast<unsigned long long>(z));
      rc = 3;
    }
    store(out.data() + i * wo, wo, y);
  }
  std::ofstream o(argv[4], std::ios::binary | std::ios::trunc);
  o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (!o) {
    std::cerr << "error: " << argv[4] << ": cannot write\n";
    return 2;
  }
  return rc;
}
