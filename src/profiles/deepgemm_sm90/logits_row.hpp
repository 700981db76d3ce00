// The `deepgemm-sm90` emulation of one logits row: H WGMMA dot products of one decoded query row against one key,
// then the kernel's head reduction (sm90.hpp). Used by the indexer logits stages when a case names the profile.
#pragma once
#include <cstdint>
#include <vector>

#include "profiles/deepgemm_sm90/sm90.hpp"

namespace dsa::profiles::sm90 {

// One query row decoded for the sm90 model, and its emulated logit against one decoded key.
struct EmuRow {
  int H = 0, D = 0;
  std::vector<std::int32_t> sig, exp;
  std::vector<std::uint8_t> nan;
  std::vector<float> s;
  EmuRow(std::int64_t h, std::int64_t d)
      : H(static_cast<int>(h)), D(static_cast<int>(d)), sig(static_cast<std::size_t>(h * d)), exp(sig.size()), nan(static_cast<std::size_t>(h)), s(static_cast<std::size_t>(h)) {}
  void decode(const std::uint8_t* q) {  // H heads of D codes
    for (int h = 0; h < H; ++h)
      nan[static_cast<std::size_t>(h)] = sm90::decode_vec(q + h * D, D, sig.data() + h * D, exp.data() + h * D);
  }
  float logit(const std::int32_t* ksig, const std::int32_t* kexp, bool knan, const float* w, float scale) {
    for (int h = 0; h < H; ++h)
      s[static_cast<std::size_t>(h)] = sm90::wgmma_dot_vec(sig.data() + h * D, exp.data() + h * D, ksig, kexp, D,
                                                       nan[static_cast<std::size_t>(h)] || knan);
    return sm90::head_reduce(s.data(), w, H, scale);
  }
};


}  // namespace dsa::profiles::sm90
