// Random values, hashes and constant-time comparison for the appliance's
// secrets (activation secrets, bearer tokens, provisioning tokens): one place
// that makes them, so that every token is made and stored the same way.
#ifndef RACKGATE_CORE_SECRETS_H_
#define RACKGATE_CORE_SECRETS_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rackgate::core {

// n bytes from OpenSSL's CSPRNG; throws std::runtime_error if it fails.
std::vector<uint8_t> RandomBytes(size_t n);
std::vector<uint8_t> Sha256(std::span<const uint8_t> data);
std::vector<uint8_t> Sha256(std::string_view text);
// Lower-case hex SHA-256, for digests in audit rows and logs.
std::string Sha256Hex(std::string_view text);

// A new bearer token: 256 random bits as base64url (43 characters). Only its
// TokenHash is ever stored.
std::string NewToken();
std::vector<uint8_t> TokenHash(std::string_view token);

// Equal length and equal bytes, in time independent of where they differ.
bool ConstantTimeEquals(std::span<const uint8_t> a, std::span<const uint8_t> b);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_SECRETS_H_
