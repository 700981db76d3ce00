// Kernel profile `ref`: the DeepSeek reference inference code (inference/model.py of the V4 release): bf16 rounding
// points of the torch reference (the compressor's bf16 C and RoPE, the bf16 indexer). v4.indexer's older attr value
// `ref-bf16` names it too.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& ref() {
  static const Profile p{"ref",
                         "DeepSeek's reference inference code (torch, bf16 rounding points); judged by the stages' derived bounds",
                         {{"v4.compressor", "", false}, {"v4.indexer", "", false}},
                         {"ref-bf16"}};
  return p;
}

}  // namespace dsa::profiles
