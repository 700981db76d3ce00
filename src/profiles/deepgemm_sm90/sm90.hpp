// Bit-exact CPU model of the DeepGEMM sm90 fp8 MQA-logits arithmetic (../shared/specs/sm90_fp8_wgmma.md, measured
// on an H200): the fp8 WGMMA dot product (§1) and the register head reduction with its fma contractions (§2).
// Primitives of the `deepgemm-sm90` profile (profile.hpp); the exact reference lives in src/engines/logits/logits_engine.cpp.
#pragma once
#include <cstdint>

namespace dsa::profiles::sm90 {

// An e4m3fn code decoded for the WGMMA model: value = sig * 2^(exp - 3), |sig| <= 15, exp = floor(log2|x|) for
// normals and -6 for subnormals (the model counts subnormal exponents as -6, see §1 step 2). sig == 0 for zeros.
struct Fp8Op {
  std::int8_t sig = 0;   // signed significand (normal: +-(8..15), subnormal: +-(1..7), zero: 0)
  std::int8_t exp = 0;   // -6 .. 8
  bool nan = false;      // 0x7F / 0xFF
};
Fp8Op decode_e4m3(std::uint8_t code);
// The 256-entry table of decode_e4m3 (valid for the program's lifetime).
const Fp8Op* fp8_table();

// One WGMMA dot product s = a . b over n fp8 elements (n a multiple of 32; chunks of 32 in order, §1).
// A NaN operand makes the result NaN (fp8 NaN codes; not part of the measured model).
float wgmma_dot(const Fp8Op* a, const Fp8Op* b, int n);
float wgmma_dot_codes(const std::uint8_t* a, const std::uint8_t* b, int n);

// Fast form: operands decoded into structure-of-arrays int32 (sig, exp as in Fp8Op; zeros get exp -100).
// decode_vec returns true when a NaN code was seen (then the dot product is NaN: pass the flag to wgmma_dot_vec).
bool decode_vec(const std::uint8_t* codes, int n, std::int32_t* sig, std::int32_t* exp);
float wgmma_dot_vec(const std::int32_t* a_sig, const std::int32_t* a_exp, const std::int32_t* b_sig,
                    const std::int32_t* b_exp, int n, bool any_nan);

// §2: the per-(row, key) head reduction of the sm90 kernels. s[H] fp32 dot products, w[H] fp32 head weights,
// sc the key's fp32 scale; H a multiple of 8. relu is the kernel's fmaxf(s, 0) (a NaN s gives 0, as CUDA fmaxf).
float head_reduce(const float* s, const float* w, int H, float sc);

}  // namespace dsa::profiles::sm90
