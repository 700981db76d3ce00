#include "tensor/expected.hpp"

namespace dsa {

std::string_view compare_kind_name(CompareKind k) {
  switch (k) {
    case CompareKind::bytes: return "bytes";
    case CompareKind::bounded: return "bounded";
    case CompareKind::topk_set: return "topk_set";
  }
  return "?";
}

}  // namespace dsa
