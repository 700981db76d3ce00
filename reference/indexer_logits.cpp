// Under construction in this session (helper-owned file).
#include <stdexcept>
#include "reference/v32_indexer.hpp"
namespace dsa::ref {
Expected indexer_logits_ragged(const Case& c, const RefOptions&) { throw std::runtime_error(c.where() + ": reference for this stage is being written"); }
Expected indexer_logits_paged(const Case& c, const RefOptions&) { throw std::runtime_error(c.where() + ": reference for this stage is being written"); }
}  // namespace dsa::ref
