// The one escaper of untrusted text.
#include "base/text.h"

#include <cstdint>
#include <cstdio>

namespace rackgate::text {

std::string PrintableAscii(std::string_view s, size_t max) {
  std::string out;
  for (char c : s) {
    const auto b = static_cast<uint8_t>(c);
    if (b >= 0x20 && b < 0x7f) {
      out.push_back(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", b);
      out += buf;
    }
    if (out.size() >= max) {
      out.resize(max > 3 ? max - 3 : max);
      out += "...";
      break;
    }
  }
  return out;
}

}  // namespace rackgate::text
