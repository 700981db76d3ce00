// Table entries of the DeepSeek-V4.1 family (one folder each under src/stages/v41/).
#pragma once
#include "stage/stage.hpp"

namespace dsa::v41 {
namespace select { Stage stage(); }
namespace indexer_k { Stage stage(); }
namespace logits { Stage stage(); }
}  // namespace dsa::v41
