// The one escaper of untrusted text.
#include "base/text.h"

#include <algorithm>
#include <cstdint>

#include "base/hex.h"

namespace rackgate::text {

namespace {

bool IsPrintable(char c) { return c >= 0x20 && c < 0x7f; }

}  // namespace

std::string PrintableAscii(std::string_view s, size_t max) {
  std::string out;
  for (char c : s) {
    const auto b = static_cast<uint8_t>(c);
    if (IsPrintable(c)) {
      out.push_back(c);
    } else {
      out += "\\x";
      out += hex::Digit(b >> 4);
      out += hex::Digit(b);
    }
    if (out.size() >= max) {
      out.resize(max > 3 ? max - 3 : max);
      out += "...";
      break;
    }
  }
  return out;
}

bool IsPrintableAscii(std::string_view s) { return std::all_of(s.begin(), s.end(), IsPrintable); }

bool IsVisibleAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c != ' ' && IsPrintable(c); });
}

}  // namespace rackgate::text
