// Sizes of what a machine sends and the appliance keeps, defined once for
// both the decoder (wire/) and the store (storage/): a field the protocol
// accepts is always one the store accepts.
#ifndef RACKGATE_BASE_SIZE_LIMITS_H_
#define RACKGATE_BASE_SIZE_LIMITS_H_

#include <cstddef>

namespace rackgate::limits {

// A TPM2B_PUBLIC (an EK's or an AK's public area): an RSA-4096 key with a
// policy digest fits well inside.
inline constexpr size_t kMaxTpm2bPublic = 1024;
// An X.509 certificate in DER (an EK certificate, an intermediate).
inline constexpr size_t kMaxCertificate = 16 * 1024;
// A session id as the appliance makes it (base64url of 18 random bytes is
// 24 characters) with room to change.
inline constexpr size_t kMaxSessionId = 64;
// A digest or a hash of a secret: SHA-512 at most.
inline constexpr size_t kMaxHash = 64;
// A machine's enrolled addresses (InternalIP, ExternalIP, the DNS kinds):
// what the store keeps, and so what GET /v1/machine may send back.
inline constexpr size_t kMaxAddresses = 64;

}  // namespace rackgate::limits

#endif  // RACKGATE_BASE_SIZE_LIMITS_H_
