// A software stand-in for the parts of a TPM that produce attestation bytes:
// keys held in OpenSSL, public areas, quotes, certifies and signatures
// marshalled with tss2-mu exactly as a TPM marshals them, and
// ActivateCredential. For tests and benchmarks only; never linked into the
// product. Not thread-safe.
#ifndef RACKGATE_ATTEST_TESTING_SOFT_TPM_H_
#define RACKGATE_ATTEST_TESTING_SOFT_TPM_H_

#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "attest/credential.h"
#include "attest/quote.h"
#include "attest/tpm.h"

struct evp_pkey_st;

namespace rackgate::testing {

using attest::Bytes;

struct SoftKeySpec {
  uint16_t type = attest::kAlgRsa;    // kAlgRsa or kAlgEcc
  int rsa_bits = 2048;
  uint16_t curve = attest::kEccNistP256;
  uint16_t name_alg = attest::kAlgSha256;
  uint16_t scheme = attest::kAlgRsaSsa;  // kAlgRsaSsa, kAlgRsaPss, kAlgEcdsa or kAlgNull
  uint16_t scheme_hash = attest::kAlgSha256;
  uint32_t attributes = attest::kAttrFixedTpm | attest::kAttrFixedParent |
                        attest::kAttrSensitiveDataOrigin | attest::kAttrUserWithAuth |
                        attest::kAttrRestricted | attest::kAttrSign;
  // For storage keys (EKs): AES-CFB with these key bits; 0 for none.
  uint16_t symmetric_bits = 0;
};

// A key pair with its TPM public area.
class SoftKey {
 public:
  static SoftKey Generate(const SoftKeySpec& spec);
  // The standard RSA-2048 / ECC EK shape (restricted decrypt, AES-CFB).
  static SoftKey GenerateEk(uint16_t type, uint16_t curve = attest::kEccNistP256);

  SoftKey(SoftKey&&) noexcept;
  SoftKey& operator=(SoftKey&&) noexcept;
  ~SoftKey();

  const attest::TpmPublic& pub() const { return pub_; }
  // The TPM2B_PUBLIC as `tpm2_createak -f tss` writes it.
  const Bytes& tpm2b_public() const { return tpm2b_; }
  Bytes name() const { return attest::ObjectName(pub_); }
  // The OpenSSL key pair. BORROWED: valid as long as this SoftKey.
  evp_pkey_st* pkey() const;

  // A marshalled TPMT_SIGNATURE over `message` with scheme/hash (defaults:
  // the key's own scheme).
  Bytes Sign(std::span<const uint8_t> message, uint16_t scheme = attest::kAlgNull,
             uint16_t hash = attest::kAlgNull) const;

  // Recovers the secret from a credential made for this (EK) key and the
  // object `name`, as TPM2_ActivateCredential does; nullopt when the
  // integrity check fails.
  std::optional<Bytes> ActivateCredential(const attest::Credential& cred,
                                          std::span<const uint8_t> name) const;

 private:
  struct Impl;
  SoftKey();
  attest::TpmPublic pub_;
  Bytes tpm2b_;
  std::unique_ptr<Impl> impl_;
};

struct SoftQuoteSpec {
  std::vector<attest::PcrSelection> selection;
  uint16_t hash_alg = attest::kAlgSha256;  // pcrDigest and signature hash
  uint32_t magic = attest::kTpmGenerated;
  uint16_t type = attest::kStAttestQuote;
  attest::ClockInfo clock{1000, 1, 0, true};
};

// A marshalled TPMS_ATTEST for a quote over `pcrs` with `nonce`.
Bytes MakeQuoteMessage(const SoftQuoteSpec& spec, const attest::PcrValues& pcrs,
                       std::span<const uint8_t> nonce);
// A marshalled TPMS_ATTEST for a certify of `name` with `nonce`.
Bytes MakeCertifyMessage(std::span<const uint8_t> name, std::span<const uint8_t> nonce,
                         uint16_t type = attest::kStAttestCertify);

}  // namespace rackgate::testing

#endif  // RACKGATE_ATTEST_TESTING_SOFT_TPM_H_
