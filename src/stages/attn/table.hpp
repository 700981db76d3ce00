// Table entries of the sparse attention family (one folder each under src/stages/attn/).
#pragma once
#include "stage/stage.hpp"

namespace dsa::attn {
namespace sparse_mla_prefill { Stage stage(); }
namespace sparse_mla_decode { Stage stage(); }
namespace v4_sparse { Stage stage(); }
namespace v4_out { Stage stage(); }
}  // namespace dsa::attn
