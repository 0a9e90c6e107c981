// Base64, the one codec (base/base64.h), on OpenSSL's EVP block coder.
#include "base/base64.h"

#include <openssl/evp.h>

namespace rackgate::base64 {

namespace {

bool InAlphabet(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

std::string Encode(std::span<const uint8_t> data) {
  std::string out(4 * ((data.size() + 2) / 3), '\0');
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(),
                          static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string Encode(std::string_view data) {
  return Encode(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

std::optional<std::vector<uint8_t>> Decode(std::string_view text, size_t max_bytes) {
  // Compare by division, never by multiplication: a huge text must not wrap.
  if (text.size() % 4 != 0 || text.size() / 4 > max_bytes / 3 + 1) return std::nullopt;
  size_t pad = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '=') {
      // Padding only in the last two positions, and nothing after it.
      if (i + 2 < text.size()) return std::nullopt;
      ++pad;
    } else if (!InAlphabet(c) || pad > 0) {
      return std::nullopt;
    }
  }
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
  if (Encode(out) != text) return std::nullopt;
  return out;
}

std::optional<std::string> DecodeToString(std::string_view text, size_t max_bytes) {
  std::optional<std::vector<uint8_t>> bytes = Decode(text, max_bytes);
  if (!bytes) return std::nullopt;
  return std::string(bytes->begin(), bytes->end());
}

std::string UrlEncode(std::span<const uint8_t> data) {
  std::string s = Encode(data);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return s;
}

}  // namespace rackgate::base64
