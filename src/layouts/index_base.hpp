// Index bases: how an engine writes "candidate position p of row r" as an index value (spec v32 §5.3).
//   relative       p in [0, len)                                    (vLLM, sglang v2)
//   ragged_offset  p + offsets[r]                                   (sglang ragged prefill)
//   page_slot      page_table[r / rows_per_request][p / page_size] * page_size + p % page_size
//                                                                   (sglang paged, FlashMLA slots)
//   absolute       row_starts[r] + p                                (demo torch.topk)
// -1 = no token. IndexMap maps both ways; the closures of a top-k reference share one.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace dsa::layouts {

enum class IndexBase { relative, ragged_offset, page_slot, absolute };
const std::vector<std::string>& index_base_names();       // in enum order
IndexBase parse_index_base(const std::string& s);          // std::invalid_argument listing the names
std::string index_base_doc();                        // every base, for the attr doc
std::string index_base_doc(const std::string& name);  // one base

struct IndexMap {
  IndexBase base = IndexBase::relative;
  std::vector<std::int64_t> len, start, offset;   // per row
  std::vector<std::int64_t> page_table;           // [nq, nb] (page_slot)
  std::int64_t nq = 0, nb = 0, page_size = 64, rows_per_request = 1;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> page_to_block;  // per request, sorted (page, block)

  // Builds the page -> block lookup of page_slot (call after filling len, page_table, nq, nb, page_size,
  // rows_per_request): the blocks a request's rows can reach, [0, ceil(max row length / page_size)).
  void index_pages();
  std::int64_t to_index(std::int64_t r, std::int64_t p) const;    // -1 when p is not a candidate of row r
  std::int64_t from_index(std::int64_t r, std::int64_t idx) const;  // -1 when idx is not a candidate of row r
};

}  // namespace dsa::layouts
