// Layer recipes: whole pipelines of one layer built from the stages' generators (src/pipeline/layers.hpp makes,
// links and checks them; this folder is the only place that names the member stages). One file per layer, one line
// per layer in table.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/golden.hpp"
#include "pipeline/layers.hpp"

namespace dsa::golden::layers {

inline std::uint64_t member_seed(std::uint64_t seed, std::uint64_t member) { return seed * 0x9E3779B97F4A7C15ull + member * 0xBF58476D1CE4E5B9ull + 1; }

inline Case bare_case(const std::string& name, const std::string& stage) {
  Case c;
  c.name = name;
  c.stage = stage;
  return c;
}

inline GoldenSpec member_spec(const char* name, const char* stage, const char* generator) {
  GoldenSpec g;
  g.name = name;
  g.stage = stage;
  g.generator = generator;
  return g;
}

std::vector<Case> build_v32_decode(std::uint64_t seed, int threads);
std::vector<Case> build_v4_decode(std::uint64_t seed, int threads);
std::vector<Case> build_v4_decode_serving(std::uint64_t seed, int threads);
std::vector<Case> build_v4_compressor_chain(std::uint64_t seed, int threads);
std::vector<Case> build_v41_decode(std::uint64_t seed, int threads);

}  // namespace dsa::golden::layers
