// Named byte layouts and index bases (architecture v2). Each layout is a type in this folder with encode (store),
// decode (a view) and describe (byte offset -> meaning for messages); this list is what `dsa-check stages` prints.
#pragma once
#include <string>
#include <vector>

namespace dsa::layouts {

struct LayoutInfo {
  std::string name;
  std::string kind;  // "cache" | "index_base"
  std::string doc;
};
const std::vector<LayoutInfo>& all();

}  // namespace dsa::layouts
