#include "tensor/case.hpp"

#include <sstream>

namespace dsa {

std::string attr_to_string(const AttrValue& v) {
  std::ostringstream o;
  o.precision(17);
  std::visit(
      [&o](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) {
          o << '"' << x << '"';
        } else if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, double>) {
          o << x;
        } else {
          o << '[';
          for (std::size_t i = 0; i < x.size(); ++i) o << (i ? ", " : "") << x[i];
          o << ']';
        }
      },
      v);
  return o.str();
}

namespace {
// Length of the valid UTF-8 sequence starting at s[i] (1..4), or 0 when the bytes there are not valid UTF-8.
std::size_t utf8_len(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((b(i + k) & 0xC0) != 0x80) return 0;
  if (n == 2 && c < 0xC2) return 0;                                  // overlong
  if (n == 3 && c == 0xE0 && b(i + 1) < 0xA0) return 0;              // overlong
  if (n == 3 && c == 0xED && b(i + 1) >= 0xA0) return 0;             // surrogates
  if (n == 4 && (c > 0xF4 || (c == 0xF0 && b(i + 1) < 0x90) || (c == 0xF4 && b(i + 1) >= 0x90))) return 0;
  return n;
}
}  // namespace

std::string printable(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  static const char* hex = "0123456789abcdef";
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const std::size_t n = utf8_len(s, i);
    if (n == 0 || c < 0x20 || c == 0x7F) {
      o += "\\x";
      o += hex[c >> 4];
      o += hex[c & 15];
      ++i;
      continue;
    }
    o.append(s.substr(i, n));
    i += n;
  }
  return o;
}

std::string Problem::str() const {
  std::ostringstream o;
  o << (file.empty() ? "<memory>" : printable(file));
  if (!case_name.empty()) o << ": case '" << printable(case_name) << "'";
  if (!tensor.empty()) o << ": " << printable(tensor);
  if (!expected.empty()) o << ": expected " << printable(expected);
  if (!found.empty()) o << (expected.empty() ? ": " : ", found ") << printable(found);
  return o.str();
}

std::string Case::where() const {
  return (file.empty() ? std::string("<memory>") : printable(file)) + ": case '" + printable(name) + "'";
}

namespace {
[[noreturn]] void bad_attr(const Case& c, const std::string& k, const std::string& expected, const std::string& found) {
  throw SchemaError(Problem{c.file, c.name, "attr " + k, expected, found});
}
}  // namespace

std::int64_t attr_as_int(const Case& c, const std::string& k, const AttrValue& v) {
  if (auto p = std::get_if<std::int64_t>(&v)) return *p;
  if (auto d = std::get_if<double>(&v); d && *d == static_cast<double>(static_cast<std::int64_t>(*d)))
    return static_cast<std::int64_t>(*d);
  bad_attr(c, k, "an integer", attr_to_string(v));
}

double attr_as_float(const Case& c, const std::string& k, const AttrValue& v) {
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<std::int64_t>(&v)) return static_cast<double>(*p);
  bad_attr(c, k, "a number", attr_to_string(v));
}

std::string attr_as_str(const Case& c, const std::string& k, const AttrValue& v) {
  if (auto p = std::get_if<std::string>(&v)) return *p;
  bad_attr(c, k, "a string", attr_to_string(v));
}

bool attr_as_bool(const Case& c, const std::string& k, const AttrValue& v) {
  if (auto p = std::get_if<std::int64_t>(&v); p && (*p == 0 || *p == 1)) return *p == 1;
  if (auto s = std::get_if<std::string>(&v)) {
    if (*s == "true" || *s == "True") return true;
    if (*s == "false" || *s == "False") return false;
  }
  bad_attr(c, k, "a boolean (0/1)", attr_to_string(v));
}

std::int64_t Case::attr_int(const std::string& k, std::optional<std::int64_t> def) const {
  auto it = attrs.find(k);
  if (it != attrs.end()) return attr_as_int(*this, k, it->second);
  if (def) return *def;
  bad_attr(*this, k, "an integer attribute", "none");
}

double Case::attr_float(const std::string& k, std::optional<double> def) const {
  auto it = attrs.find(k);
  if (it != attrs.end()) return attr_as_float(*this, k, it->second);
  if (def) return *def;
  bad_attr(*this, k, "a numeric attribute", "none");
}

std::string Case::attr_str(const std::string& k, std::optional<std::string> def) const {
  auto it = attrs.find(k);
  if (it != attrs.end()) return attr_as_str(*this, k, it->second);
  if (def) return *def;
  bad_attr(*this, k, "a string attribute", "none");
}

bool Case::attr_bool(const std::string& k, std::optional<bool> def) const {
  auto it = attrs.find(k);
  if (it != attrs.end()) return attr_as_bool(*this, k, it->second);
  if (def) return *def;
  bad_attr(*this, k, "a boolean attribute (0/1)", "none");
}

const Tensor& Case::input(const std::string& k) const {
  auto it = inputs.find(k);
  if (it == inputs.end()) throw SchemaError(Problem{file, name, "inputs/" + k, "a tensor", "none"});
  return it->second;
}

const Tensor* Case::input_opt(const std::string& k) const {
  auto it = inputs.find(k);
  return it == inputs.end() ? nullptr : &it->second;
}

}  // namespace dsa
