// Benchmark inputs shared by bench_logits.cpp (CPU, Google Benchmark) and gpu_logits.cpp (CUDA): seeded random fp8
// codes (no NaN codes), gates and scales at DeepGEMM's test shapes.
#pragma once
#include <cstring>
#include <random>
#include <vector>

#include "stage/stage.hpp"

namespace dsa::bench {

using i64 = std::int64_t;

inline void fill_codes(Tensor& t, std::mt19937_64& g) {
  for (auto& c : t.span<std::uint8_t>()) {
    c = static_cast<std::uint8_t>(g() & 0xFF);
    if ((c & 0x7F) == 0x7F) c = 0x38;
  }
}
inline void fill_f32(Tensor& t, std::mt19937_64& g, float lo, float span) {
  for (auto& x : t.span<float>()) x = lo + span * static_cast<float>(g() % 65536) / 65536.0f;
}

// Ragged prefill: every row sees all N keys, or (causal) row i sees keys [0, N - S + i + 1).
inline Case ragged_case(i64 S, i64 N, i64 H, i64 D, bool causal = false) {
  std::mt19937_64 g(42);
  Case c;
  c.name = "bench";
  c.stage = "indexer.logits_ragged";
  c.inputs["q"] = Tensor(DType::fp8_e4m3fn, {S, H, D});
  c.inputs["kv"] = Tensor(DType::fp8_e4m3fn, {N, D});
  c.inputs["kv_scale"] = Tensor(DType::f32, {N});
  c.inputs["weights"] = Tensor(DType::f32, {S, H});
  fill_codes(c.inputs["q"], g);
  fill_codes(c.inputs["kv"], g);
  fill_f32(c.inputs["kv_scale"], g, 0.001f, 0.01f);
  fill_f32(c.inputs["weights"], g, -1.0f, 2.0f);
  std::vector<std::int32_t> ks(static_cast<std::size_t>(S), 0), ke(static_cast<std::size_t>(S), static_cast<std::int32_t>(N));
  if (causal)
    for (i64 i = 0; i < S; ++i) ke[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(N - S + i + 1);
  c.inputs["ks"] = Tensor::from_vector(DType::i32, {S}, ks);
  c.inputs["ke"] = Tensor::from_vector(DType::i32, {S}, ke);
  apply_attr_defaults(c);
  return c;
}

// Paged decode: B requests of ctx keys (a multiple of 64) over 64-token pages in a scattered block table.
inline Case paged_case(i64 B, i64 NN, i64 ctx, i64 H, i64 D) {
  std::mt19937_64 g(43);
  const i64 ps = 64, MB = ctx / ps, P = B * MB;
  Case c;
  c.name = "bench";
  c.stage = "indexer.logits_paged";
  c.inputs["q"] = Tensor(DType::fp8_e4m3fn, {B, NN, H, D});
  fill_codes(c.inputs["q"], g);
  Tensor cache(DType::u8, {P, ps, 1, D + 4});
  for (i64 p = 0; p < P; ++p) {
    std::uint8_t* base = cache.data<std::uint8_t>() + p * ps * (D + 4);
    for (i64 i = 0; i < ps * D; ++i) {
      auto v = static_cast<std::uint8_t>(g() & 0xFF);
      base[i] = (v & 0x7F) == 0x7F ? 0x38 : v;
    }
    for (i64 t = 0; t < ps; ++t) {
      const float s = 0.001f + static_cast<float>(g() % 1024) / 65536.0f;
      std::memcpy(base + ps * D + 4 * t, &s, 4);
    }
  }
  c.inputs["kv_cache"] = cache;
  c.inputs["weights"] = Tensor(DType::f32, {B * NN, H});
  fill_f32(c.inputs["weights"], g, -1.0f, 2.0f);
  std::vector<std::int32_t> pages(static_cast<std::size_t>(P));
  for (i64 i = 0; i < P; ++i) pages[static_cast<std::size_t>(i)] = static_cast<std::int32_t>((i * 7919) % P);  // scattered
  c.inputs["block_table"] = Tensor::from_vector(DType::i32, {B, MB}, pages);
  c.inputs["context_lens"] = Tensor::from_vector(DType::i32, {B}, std::vector<std::int32_t>(static_cast<std::size_t>(B), static_cast<std::int32_t>(ctx)));
  c.attrs["max_context_len"] = ctx;
  apply_attr_defaults(c);
  return c;
}

}  // namespace dsa::bench
