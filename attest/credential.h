// TPM2_MakeCredential in software: wraps a secret so that only the TPM holding
// a given EK, and only for an object with a given name (the AK), can recover it
// with TPM2_ActivateCredential. The file form is documented in docs/formats.md.
#ifndef RACKGATE_ATTEST_CREDENTIAL_H_
#define RACKGATE_ATTEST_CREDENTIAL_H_

#include <cstdint>
#include <span>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// The two TPM2_ActivateCredential inputs, each the contents of its TPM2B.
struct Credential {
  Bytes id_object;         // TPM2B_ID_OBJECT: integrityHMAC (TPM2B) || encIdentity
  Bytes encrypted_secret;  // TPM2B_ENCRYPTED_SECRET: the seed, encrypted to the EK
};

// Wraps `secret` for the EK `ek` and the object named `object_name`, exactly as
// TPM 2.0 Part 1 §24 and Part 3 TPM2_MakeCredential define it:
//  - RSA EK: a random seed encrypted with RSA-OAEP (the EK's nameAlg, label
//    "IDENTITY"); ECC EK (P-256, P-384, P-521): an ephemeral ECDH key, the seed
//    derived with KDFe(nameAlg, Z, "IDENTITY", ephemeral.x, ek.x).
//  - symKey = KDFa(nameAlg, seed, "STORAGE", name, "", EK's AES key bits);
//    encIdentity = AES-CFB(symKey, IV 0, TPM2B_DIGEST(secret)).
//  - HMACkey = KDFa(nameAlg, seed, "INTEGRITY", "", "", digest bits);
//    integrityHMAC = HMAC(HMACkey, encIdentity || name).
// REQUIRES nothing of the inputs; refuses with kInvalidArgument
// ("credential_secret_size" when the secret is empty or longer than the EK
// nameAlg's digest, "object_name_malformed" for a name that is not
// nameAlg || digest) or kUnsupported ("ek_unsupported" when the EK is not a
// restricted decryption key with AES-CFB, or uses another curve/key type).
// Uses the OpenSSL RNG for the seed or the ephemeral key.
Result<Credential> MakeCredential(const TpmPublic& ek, std::span<const uint8_t> object_name,
                                  std::span<const uint8_t> secret);

// The file `tpm2_makecredential -o` writes: magic 0xBADCC0DE, version 1, then
// the TPM2B_ID_OBJECT and the TPM2B_ENCRYPTED_SECRET (big-endian sizes).
Bytes EncodeCredentialFile(const Credential& cred);
// Its inverse; kInvalidArgument ("credential_file_malformed") on bad bytes.
Result<Credential> DecodeCredentialFile(std::span<const uint8_t> data);

// TPM 2.0 Part 1 §11.4.10.2 KDFa (SP 800-108 counter mode, HMAC with
// `hash_alg`), and §11.4.10.3 KDFe (SP 800-56A concatenation KDF). `label` is
// given without its terminating zero, which both add. Exposed for tests.
Bytes KdfA(uint16_t hash_alg, std::span<const uint8_t> key, std::string_view label,
           std::span<const uint8_t> context_u, std::span<const uint8_t> context_v, size_t bits);
Bytes KdfE(uint16_t hash_alg, std::span<const uint8_t> z, std::string_view label,
           std::span<const uint8_t> party_u, std::span<const uint8_t> party_v, size_t bits);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_CREDENTIAL_H_
