// Named byte layouts and index bases (architecture v2). Each layout is a type in this folder with encode (store),
// decode (a view) and describe (byte offset -> meaning for messages); this list is what `dsa-check stages` prints.
#pragma once
#include <string>
#include <vector>

#include "schema/schema.hpp"

namespace dsa::layouts {

struct LayoutInfo {
  std::string name;
  std::string kind;  // "cache" | "index_base"
  std::string doc;
};
const std::vector<LayoutInfo>& all();

// attr `page_size`: tokens per page of a paged cache (every paged layout; the writers and readers of one cache).
AttrSpec page_size_attr();

}  // namespace dsa::layouts
