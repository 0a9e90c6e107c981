// Base64 and hex for wire fields.
#include "wire/codec.h"

#include <openssl/evp.h>

#include "attest/ek_identity.h"
#include "base/hex.h"

namespace rackgate::wire {

std::string Base64Encode(std::span<const uint8_t> data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text, size_t max_bytes) {
  if (text.size() % 4 != 0 || text.size() / 4 * 3 > max_bytes + 2) return std::nullopt;
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/';
    if (c == '=') {
      // Padding only in the last two positions, and nothing after it.
      if (i + 2 < text.size()) return std::nullopt;
      ++pad;
    } else if (!alpha || pad > 0) {
      return std::nullopt;
    }
  }
  if (pad > 2) return std::nullopt;
  std::vector<uint8_t> out(text.size() / 4 * 3);
  if (!text.empty()) {
    int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                            static_cast<int>(text.size()));
    if (n < 0) return std::nullopt;
  }
  out.resize(out.size() - pad);
  if (out.size() > max_bytes) return std::nullopt;
  // Canonical form only: re-encoding must give back the same text, so that
  // unused bits in the last group cannot smuggle a second spelling.
  if (Base64Encode(out) != text) return std::nullopt;
  return out;
}

std::string Base64UrlEncode(std::span<const uint8_t> data) {
  std::string s = Base64Encode(data);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return s;
}

}  // namespace rackgate::wire
