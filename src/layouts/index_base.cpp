#include "layouts/index_base.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace dsa::layouts {

namespace {
struct BaseInfo {
  const char* name;
  const char* doc;
};
// In enum order.
constexpr BaseInfo kBases[] = {
    {"relative", "position in [0,len) (vLLM, sglang v2)"},
    {"ragged_offset", "idx + offsets[row] (sglang ragged)"},
    {"page_slot", "page_table[r/rows_per_request][p/page_size]*page_size + p%page_size with p the relative position "
                  "(sglang paged with page_size 1 = token table, FlashMLA slots)"},
    {"absolute", "row_start + p (demo)"},
};
}  // namespace

const std::vector<std::string>& index_base_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& b : kBases) v.push_back(b.name);
    return v;
  }();
  return n;
}

std::string index_base_doc(const std::string& name) {
  for (const auto& b : kBases)
    if (name == b.name) return b.doc;
  return "";
}

IndexBase parse_index_base(const std::string& s) {
  const auto& n = index_base_names();
  for (std::size_t i = 0; i < n.size(); ++i)
    if (n[i] == s) return static_cast<IndexBase>(i);
  throw std::invalid_argument("index_base must be relative, ragged_offset, page_slot or absolute, found '" + s + "'");
}

std::string index_base_doc() {
  std::string s;
  for (const auto& b : kBases) s += std::string(b.name) + ": " + b.doc + "; ";
  s.resize(s.size() - 2);
  return s + ". -1 = no token";
}

void IndexMap::index_pages() {
  std::vector<std::int64_t> used(static_cast<std::size_t>(nq), 0);
  for (std::size_t r = 0; r < len.size(); ++r) {
    const std::int64_t q = static_cast<std::int64_t>(r) / rows_per_request;
    if (q < nq) {
      auto& u = used[static_cast<std::size_t>(q)];
      u = std::max(u, (len[r] + page_size - 1) / page_size);
    }
  }
  page_to_block.assign(static_cast<std::size_t>(nq), {});
  for (std::int64_t q = 0; q < nq; ++q) {
    auto& m = page_to_block[static_cast<std::size_t>(q)];
    for (std::int64_t b = 0; b < std::min(used[static_cast<std::size_t>(q)], nb); ++b)
      m.emplace_back(page_table[static_cast<std::size_t>(q * nb + b)], b);
    std::sort(m.begin(), m.end());  // (page, block): a duplicated page resolves to its first block
  }
}

std::int64_t IndexMap::to_index(std::int64_t r, std::int64_t p) const {
  if (r < 0 || r >= static_cast<std::int64_t>(len.size()) || p < 0 || p >= len[static_cast<std::size_t>(r)]) return -1;
  const auto ru = static_cast<std::size_t>(r);
  switch (base) {
    case IndexBase::relative: return p;
    case IndexBase::ragged_offset: return p + offset[ru];
    case IndexBase::absolute: return start[ru] + p;
    case IndexBase::page_slot: {
      const std::int64_t q = r / rows_per_request, blk = p / page_size;
      if (q >= nq || blk >= nb) return -1;
      const std::int64_t page = page_table[static_cast<std::size_t>(q * nb + blk)];
      return page < 0 ? -1 : page * page_size + p % page_size;
    }
  }
  return -1;
}

std::int64_t IndexMap::from_index(std::int64_t r, std::int64_t idx) const {
  if (r < 0 || r >= static_cast<std::int64_t>(len.size()) || idx < 0) return -1;
  const auto ru = static_cast<std::size_t>(r);
  std::int64_t p = -1;
  switch (base) {
    case IndexBase::relative: p = idx; break;
    case IndexBase::ragged_offset: p = idx - offset[ru]; break;
    case IndexBase::absolute: p = idx - start[ru]; break;
    case IndexBase::page_slot: {
      const std::int64_t q = r / rows_per_request;
      if (q >= nq) return -1;
      const auto& m = page_to_block[static_cast<std::size_t>(q)];
      const std::int64_t page = idx / page_size;
      auto it = std::lower_bound(m.begin(), m.end(), std::make_pair(page, std::numeric_limits<std::int64_t>::min()));
      if (it == m.end() || it->first != page) return -1;
      p = it->second * page_size + idx % page_size;
      break;
    }
  }
  return p >= 0 && p < len[ru] ? p : -1;
}

}  // namespace dsa::layouts
