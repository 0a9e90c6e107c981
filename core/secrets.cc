// Random values, hashes and constant-time comparison for secrets.
#include "core/secrets.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "attest/tpm.h"
#include "wire/codec.h"
#include "base/hex.h"

namespace rackgate::core {

std::vector<uint8_t> RandomBytes(size_t n) {
  std::vector<uint8_t> b(n);
  if (RAND_bytes(b.data(), static_cast<int>(n)) != 1) throw std::runtime_error("RAND_bytes failed");
  return b;
}

std::vector<uint8_t> Sha256(std::span<const uint8_t> data) {
  std::vector<uint8_t> out(32);
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("EVP_Digest failed");
  }
  return out;
}

std::vector<uint8_t> Sha256(std::string_view text) {
  return Sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

std::string Sha256Hex(std::string_view text) { return hex::Encode(Sha256(text)); }

std::string NewToken() { return wire::Base64UrlEncode(RandomBytes(32)); }

std::vector<uint8_t> TokenHash(std::string_view token) { return Sha256(token); }

bool ConstantTimeEquals(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace rackgate::core
