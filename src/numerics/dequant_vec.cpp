#include "numerics/dequant_vec.hpp"

#include <cstring>

#include "numerics/formats.hpp"

namespace dsa::num {

// (clang takes target_clones only on a function not declared before without it: the exported name forwards.)
namespace {
__attribute__((target_clones("avx512f", "avx2", "default"))) void e4m3_scale_loop(const std::uint8_t* codes, std::int64_t n, float s,
                                                                                  double* out) {
  const float* t = e4m3_table();
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = t[codes[i]] * s;
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    // halfcore::f32_to_bf16 in fp32 bits: NaN -> sign | 0x7FC00000, else RNE at bit 16 (the carry may reach inf).
    const std::uint32_t r = (u & 0x7FFFFFFFu) > 0x7F800000u ? ((u & 0x80000000u) | 0x7FC00000u) : ((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
    float f;
    std::memcpy(&f, &r, 4);
    out[i] = static_cast<double>(f);
  }
}
}  // namespace

void e4m3_times_scale_bf16(const std::uint8_t* codes, std::int64_t n, float s, double* out) { e4m3_scale_loop(codes, n, s, out); }

}  // namespace dsa::num
