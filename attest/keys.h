// TPM public areas as OpenSSL keys, for attest/'s verifiers and MakeCredential.
// Internal.
#ifndef RACKGATE_ATTEST_KEYS_H_
#define RACKGATE_ATTEST_KEYS_H_

#if !defined(RACKGATE_ATTEST_INTERNAL)
#error "attest/keys.h is internal to attest/"
#endif

#include "base/ossl.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// The OpenSSL group name for a TPM curve ("P-256", "P-384", "P-521"), or nullptr.
const char* CurveGroupName(uint16_t tpm_curve);
// The field size in bytes of a TPM curve (32, 48), or 0.
size_t CurveFieldBytes(uint16_t tpm_curve);

// An EVP_PKEY holding the public key of an RSA or ECC (P-256/P-384/P-521) public
// area. kUnsupported for other curves; kInvalidArgument when the point is not
// on the curve or the modulus is unusable. The caller owns the key.
Result<ossl::PkeyPtr> PkeyFromTpmPublic(const TpmPublic& pub);

// The uncompressed SEC1 point of an ECC public area: 0x04 || X || Y, each
// left-padded to the curve's field size. REQUIRES: a supported curve
// (CurveFieldBytes > 0) and coordinates that fit it.
Bytes EcPointFromTpmPublic(const TpmPublic& pub);

// Big-endian unsigned integer left-padded with zeros to `width` bytes.
// REQUIRES: the value (leading zeros ignored) fits in `width`.
Bytes LeftPad(std::span<const uint8_t> v, size_t width);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_KEYS_H_
