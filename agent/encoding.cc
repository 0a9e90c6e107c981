// Base64 through OpenSSL's block coder, hex through OPENSSL_hexstr2buf_ex.
#include "agent/encoding.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <limits>
#include <stdexcept>

namespace rackgate::agent {

namespace {

bool IsBase64Char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

bool IsHexChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

}  // namespace

std::string Base64Encode(std::span<const uint8_t> data) {
  if (data.empty()) return {};
  // EVP_EncodeBlock takes an int length and writes 4 bytes per 3, plus a NUL.
  if (data.size() > static_cast<size_t>(std::numeric_limits<int>::max() / 4 * 3 - 3)) {
    throw std::length_error("Base64Encode: input too large");
  }
  std::string out((data.size() + 2) / 3 * 4 + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data.data(),
                                static_cast<int>(data.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::optional<std::vector<uint8_t>> Base64Decode(std::string_view text, size_t max_bytes) {
  if (text.empty()) return std::vector<uint8_t>();
  if (text.size() % 4 != 0) return std::nullopt;
  // Check the size before decoding anything: 3 bytes per 4 characters, less
  // the padding.
  size_t pad = 0;
  if (text.back() == '=') pad = text[text.size() - 2] == '=' ? 2 : 1;
  const size_t decoded = text.size() / 4 * 3 - pad;
  if (decoded > max_bytes || text.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return std::nullopt;
  }
  // EVP_DecodeBlock skips leading and trailing whitespace and does not say
  // how much padding it saw, so the alphabet and the padding are checked
  // here: '=' only in the last `pad` positions.
  for (size_t i = 0; i < text.size() - pad; ++i) {
    if (!IsBase64Char(text[i])) return std::nullopt;
  }
  // Canonical: the bits the padding leaves unused must be zero, or two
  // different strings would decode to the same bytes.
  if (pad > 0) {
    const char last = text[text.size() - pad - 1];
    static constexpr std::string_view kAlphabet =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t v = kAlphabet.find(last);
    if (v == std::string_view::npos || (v & (pad == 1 ? 0x03 : 0x0f)) != 0) return std::nullopt;
  }
  std::vector<uint8_t> out(text.size() / 4 * 3);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  // EVP_DecodeBlock decodes the padding as zero bytes and counts them.
  if (n < 0 || static_cast<size_t>(n) != out.size()) return std::nullopt;
  out.resize(decoded);
  return out;
}

std::optional<std::vector<uint8_t>> HexDecode(std::string_view text, size_t max_bytes) {
  if (text.size() % 2 != 0 || text.size() / 2 > max_bytes) return std::nullopt;
  for (char c : text) {
    if (!IsHexChar(c)) return std::nullopt;
  }
  if (text.empty()) return std::vector<uint8_t>();
  std::vector<uint8_t> out(text.size() / 2);
  const std::string z(text);  // NUL-terminated for OpenSSL
  size_t n = 0;
  if (OPENSSL_hexstr2buf_ex(out.data(), out.size(), &n, z.c_str(), '\0') != 1 || n != out.size()) {
    return std::nullopt;
  }
  return out;
}

}  // namespace rackgate::agent
