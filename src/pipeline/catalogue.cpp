// The golden catalogue: every stage's rows (Stage::goldens), in table order; generators looked up across stages.
#include "pipeline/catalogue.hpp"

#include <sstream>
#include <stdexcept>

namespace dsa::golden {

const std::vector<GoldenSpec>& catalogue() {
  static const std::vector<GoldenSpec> all = [] {
    std::vector<GoldenSpec> v;
    for (const Stage& st : stages()) v.insert(v.end(), st.goldens.begin(), st.goldens.end());
    return v;
  }();
  return all;
}

const Generator* find_generator(const std::string& name) {
  for (const Stage& st : stages())
    for (const auto& g : st.generators)
      if (g.name == name) return &g;
  return nullptr;
}

const GoldenSpec* find_spec(const std::string& name) {
  for (const auto& s : catalogue())
    if (s.name == name) return &s;
  return nullptr;
}

const Mutant* find_mutant(const std::string& name) {
  for (const Stage& st : stages())
    for (const auto& m : st.mutants)
      if (m.name == name) return &m;
  return nullptr;
}

std::string shapes_str(const GoldenSpec& s) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [k, v] : s.dims) {
    o << (first ? "" : " ") << k << "=" << v;
    first = false;
  }
  for (const auto& [k, v] : s.lists) {
    o << (first ? "" : " ") << k << "=[";
    for (std::size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
    o << "]";
    first = false;
  }
  return o.str();
}

std::string options_str(const GoldenSpec& s) {
  std::ostringstream o;
  bool first = true;
  for (const auto& [k, v] : s.attrs) {
    std::string str = attr_to_string(v);
    if (str.size() >= 2 && str.front() == '"') str = str.substr(1, str.size() - 2);
    o << (first ? "" : " ") << k << "=" << str;
    first = false;
  }
  for (const auto& [k, v] : s.params) {
    std::ostringstream x;
    x << v;
    o << (first ? "" : " ") << k << "=" << x.str();
    first = false;
  }
  return o.str();
}

}  // namespace dsa::golden
