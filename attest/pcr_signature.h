// Signed PCR 11 values (`systemd-measure sign`, a UKI's .pcrsig section):
// the TPM2 PolicyPCR digest a signature covers, the signer's key
// fingerprint as systemd computes it, and the signature check. The JSON
// document is read in wire/pcr_signature_json.h; docs/policy.md
// ("uki_signed") says what is signed and why it binds a UKI.
//
// What systemd 252's `systemd-measure sign` produces, measured on Debian 12
// (firmware-tests/uki_signed.sh repeats it):
//   pol  = PolicyPCR digest: SHA-256(0^32 || TPM_CC_PolicyPCR (0000017f) ||
//          TPML_PCR_SELECTION {1, sha256, 3, {11}} || SHA-256(PCR 11 value))
//   sig  = a signature over SHA-256(pol) (RSA PKCS#1 v1.5 with SHA-256: what
//          TPM2_VerifySignature checks for PolicyAuthorize with an empty
//          policyRef), not over pol taken as the digest
//   pkfp = SHA-256 of i2d_PublicKey's encoding of the key (for RSA the
//          PKCS#1 RSAPublicKey DER), NOT of the SubjectPublicKeyInfo
//
// Thread safety: all functions are pure and may be called concurrently.
#ifndef RACKGATE_ATTEST_PCR_SIGNATURE_H_
#define RACKGATE_ATTEST_PCR_SIGNATURE_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "attest/tpm.h"
#include "base/status.h"

namespace rackgate::attest {

// TPM_CC_PolicyPCR.
inline constexpr uint32_t kTpmCcPolicyPcr = 0x0000017F;

// The PolicyPCR digest (sha256 policy session, fresh policy) of one PCR of
// `bank` holding `value`: what a `systemd-measure sign` entry's "pol" is.
// kInvalidArgument "pcr_signature_malformed" for a bank we cannot hash, a
// value that is not its bank's size or a PCR above 23.
Result<Bytes> PolicyPcrDigest(uint16_t bank, uint32_t pcr, std::span<const uint8_t> value);

// A PEM public key ("-----BEGIN PUBLIC KEY-----", RSA or EC) as DER
// SubjectPublicKeyInfo. kInvalidArgument "public_key_malformed" when it does
// not parse, holds anything after the key, or is neither RSA nor EC.
Result<Bytes> PublicKeyDerFromPem(std::string_view pem);

// The fingerprint systemd-measure writes as "pkfp" for a key given as DER
// SubjectPublicKeyInfo: SHA-256 of i2d_PublicKey's encoding.
// kInvalidArgument "public_key_malformed" when the DER does not parse.
Result<Bytes> SystemdPublicKeyFingerprint(std::span<const uint8_t> spki_der);

// Whether `signature` is a signature by the key (DER SubjectPublicKeyInfo)
// over SHA-256(policy_digest), as systemd-measure makes it. Ok, or
// kVerificationFailed "uki_signature_invalid"; kInvalidArgument
// "public_key_malformed" for a key that does not parse.
Status VerifyPcrSignature(std::span<const uint8_t> spki_der, std::span<const uint8_t> policy_digest,
                          std::span<const uint8_t> signature);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_PCR_SIGNATURE_H_
