// Base64 for wire fields: the one codec is base/base64.h.
#include "wire/codec.h"

#include "base/base64.h"

namespace rackgate::wire {

std::string Base64Encode(std::span<const uint8_t> data) { return base64::Encode(data); }

std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text, size_t max_bytes) {
  return base64::Decode(text, max_bytes);
}

std::string Base64UrlEncode(std::span<const uint8_t> data) { return base64::UrlEncode(data); }

}  // namespace rackgate::wire
