// Table entries of the V3.2 lightning-indexer family (one folder each under src/stages/indexer/).
#pragma once
#include "stage/stage.hpp"

namespace dsa::indexer {
namespace quant { Stage stage(); }
namespace prolog { Stage stage(); }
namespace kcache_store { Stage stage(); }
namespace logits_ragged { Stage stage(); }
namespace logits_paged { Stage stage(); }
namespace topk { Stage stage(); }
namespace fused { Stage stage(); }
namespace npu_lightning { Stage stage(); }
}  // namespace dsa::indexer
