// SHA-256 for modules that must not name OpenSSL in their headers (storage/'s
// audit chain, docs/audit.md). Backed by OpenSSL's EVP; nothing of it leaks.
#ifndef RACKGATE_BASE_SHA256_H_
#define RACKGATE_BASE_SHA256_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>

namespace rackgate::sha256 {

inline constexpr size_t kDigestSize = 32;

// The SHA-256 digest of `data`. Throws std::runtime_error only when OpenSSL
// cannot hash at all (no provider: a broken installation, not an input).
std::array<uint8_t, kDigestSize> Digest(std::span<const uint8_t> data);

// Lower-case hex of Digest(data): 64 characters.
std::string Hex(std::span<const uint8_t> data);

}  // namespace rackgate::sha256

#endif  // RACKGATE_BASE_SHA256_H_
