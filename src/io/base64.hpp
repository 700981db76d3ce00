// Base64 (RFC 4648, with '=' padding) for bytes carried in text: the JSON report's heatmap cells, the HTML report's
// PNG data URIs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace dsa::io {

inline constexpr const char* kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

inline std::string base64_encode(const void* data, std::size_t n) {
  const auto* b = static_cast<const unsigned char*>(data);
  const char* k = kBase64Alphabet;
  std::string o;
  o.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t v = (std::uint32_t{b[i]} << 16) | (i + 1 < n ? std::uint32_t{b[i + 1]} << 8 : 0u) | (i + 2 < n ? std::uint32_t{b[i + 2]} : 0u);
    o += k[(v >> 18) & 63];
    o += k[(v >> 12) & 63];
    o += i + 1 < n ? k[(v >> 6) & 63] : '=';
    o += i + 2 < n ? k[v & 63] : '=';
  }
  return o;
}

// Characters outside the alphabet (padding, whitespace) are skipped.
inline std::vector<std::uint8_t> base64_decode(const std::string& s) {
  std::vector<std::uint8_t> o;
  std::uint32_t acc = 0;
  int bits = 0;
  int value[256];
  for (int& v : value) v = -1;
  for (int i = 0; i < 64; ++i) value[static_cast<unsigned char>(kBase64Alphabet[i])] = i;
  for (char ch : s) {
    const int v = value[static_cast<unsigned char>(ch)];
    if (v < 0) continue;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o.push_back(static_cast<std::uint8_t>((acc >> bits) & 0xFF));
    }
  }
  return o;
}

}  // namespace dsa::io
