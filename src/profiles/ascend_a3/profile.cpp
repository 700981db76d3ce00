// Kernel profile `ascend-a3`: the Ascend A3 (910C) ops vLLM-Ascend's DeepSeek V3.2 / V4 backends call
// (npu_lightning_indexer, the quant lightning indexer with its int8 q/k and fp16 pipeline, the compressor op,
// npu_sparse_attn_sharedkv): the default producer of the stages modelled on them.
#include "profiles/profiles.hpp"

namespace dsa::profiles {

const Profile& ascend_a3() {
  static const Profile p{"ascend-a3",
                         "Ascend A3 (910C) ops of vLLM-Ascend / CANN: fp16/fp32 vector pipelines and int8 cube dots; judged by "
                         "the stages' derived bounds",
                         {{"indexer.npu_lightning", "", false},
                          {"v4.compressor", "", false},
                          {"v4.indexer", "", false},
                          {"v4.indexer_prolog", "", false},
                          {"attn.v4_sparse", "", false}},
                         {}};
  return p;
}

}  // namespace dsa::profiles
