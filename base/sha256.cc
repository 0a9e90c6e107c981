// SHA-256 over OpenSSL's one-shot EVP_Digest.
#include "base/sha256.h"

#include "base/hex.h"

#include <openssl/evp.h>

#include <stdexcept>

namespace rackgate::sha256 {

std::array<uint8_t, kDigestSize> Digest(std::span<const uint8_t> data) {
  std::array<uint8_t, kDigestSize> out{};
  unsigned int n = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &n, EVP_sha256(), nullptr) != 1 || n != kDigestSize) {
    throw std::runtime_error("SHA-256 is unavailable (OpenSSL EVP_Digest failed)");
  }
  return out;
}

std::string Hex(std::span<const uint8_t> data) {
  const auto d = Digest(data);
  return hex::Encode(d);
}

}  // namespace rackgate::sha256
