// Table entries of the DeepSeek-V4 family (one folder each under src/stages/v4/).
#pragma once
#include "stage/stage.hpp"

namespace dsa::v4 {
namespace compressor { Stage stage(); }
namespace compressor_cache { Stage stage(); }
namespace indexer { Stage stage(); }
namespace indexer_prolog { Stage stage(); }
}  // namespace dsa::v4
