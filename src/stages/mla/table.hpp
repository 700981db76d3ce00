// Table entries of the V3.2 MLA KV-cache family (one folder each under src/stages/mla/).
#pragma once
#include "stage/stage.hpp"

namespace dsa::mla {
namespace kcache_store { Stage stage(); }
}  // namespace dsa::mla
