// Base64 and hex for wire fields.
#include "wire/codec.h"

#include <openssl/evp.h>

#include "attest/ek_identity.h"

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

std::string HexEncode(std::span<const uint8_t> data) { return attest::HexString(data); }

std::optional<std::vector<uint8_t>> HexDecode(std::string_view text, size_t max_bytes) {
  if (text.size() % 2 != 0 || text.size() / 2 > max_bytes) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::vector<uint8_t> out(text.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(text[2 * i]), lo = nibble(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return out;
}

}  // namespace rackgate::wire
