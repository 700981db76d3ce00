// Kernel profile `ascend-950`: the Ascend 950 lightning indexer (torch_npu.npu_lightning_indexer), which sorts on
// bf16 keys where the A3 sorts fp32 scores.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& ascend_950() {
  static const Profile p{"ascend-950",
                         "Ascend 950 lightning indexer: the A3 arithmetic with the top-k sorted on bf16-rounded scores",
                         {{"indexer.npu_lightning", "", false}},
                         {}};
  return p;
}

}  // namespace dsa::profiles
