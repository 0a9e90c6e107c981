// Hex, the one codec (base/hex.h).
#include "base/hex.h"

namespace rackgate::hex {

std::string Encode(std::span<const uint8_t> data) {
  std::string out;
  out.reserve(2 * data.size());
  for (uint8_t b : data) {
    out.push_back(Digit(b >> 4));
    out.push_back(Digit(b));
  }
  return out;
}

bool IsLowerHex(std::string_view text) {
  return text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

bool IsSha256Hex(std::string_view text) { return text.size() == 64 && IsLowerHex(text); }

std::optional<std::vector<uint8_t>> Decode(std::string_view text, size_t max_bytes) {
  if (text.size() % 2 != 0 || text.size() / 2 > max_bytes) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    const int hi = nibble(text[2 * i]);
    const int lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

std::string PercentEncode(std::string_view text) {
  static constexpr char kUpper[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '.' || c == '_' || c == '~';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kUpper[c >> 4];
      out += kUpper[c & 0xf];
    }
  }
  return out;
}

}  // namespace rackgate::hex
