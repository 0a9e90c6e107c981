// A software stand-in for the parts of a TPM that produce attestation bytes:
// keys held in OpenSSL, public areas, quotes, certifies and signatures
// marshalled with tss2-mu exactly as a TPM marshals them, and
// ActivateCredential. For tests and benchmarks only; never linked into the
// product. Not thread-safe.
#ifndef RACKGATE_ATTEST_TESTING_SOFT_TPM_H_
#define RACKGATE_ATTEST_TESTING_SOFT_TPM_H_

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <tuple>
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
  // TPMT_PUBLIC.authPolicy (EKs carry the TCG EK profile's policy).
  Bytes auth_policy;
};

// TCG EK Credential Profile policy digests: PolicyA (PolicySecret of the
// endorsement hierarchy) in sha256, the authPolicy of the low-range RSA-2048
// (L-1) and ECC P-256 (L-2) templates; and PolicyOR(PolicyA, PolicyC) in
// sha384, the authPolicy of the high-range P-384 template (H-3).
Bytes TcgEkPolicyASha256();
Bytes TcgEkPolicyOrSha384();
// PolicyOR(PolicyA, PolicyC) in sha512: the authPolicy of the high-range
// P-521 template (H-4), as `tpm2_createek -G ecc521` on swtpm reports it.
Bytes TcgEkPolicyOrSha512();

// A key pair with its TPM public area.
class SoftKey {
 public:
  static SoftKey Generate(const SoftKeySpec& spec);
  // A SoftKey for an existing key pair (RSA or EC, matching spec.type and
  // spec.rsa_bits / spec.curve). TAKES OWNERSHIP of `key`, also on failure.
  static SoftKey FromKey(evp_pkey_st* key, const SoftKeySpec& spec);
  // The TCG EK profile templates, as TPM2_CreatePrimary fills them: RSA-2048
  // (L-1) or ECC P-256 (L-2): nameAlg sha256, attributes fixedTPM|fixedParent|
  // sensitiveDataOrigin|adminWithPolicy|restricted|decrypt (0x000300b2),
  // AES-128-CFB, PolicyA; ECC P-384 (H-3): nameAlg sha384, userWithAuth too
  // (0x000300f2), AES-256-CFB, PolicyOR(PolicyA, PolicyC).
  static SoftKeySpec EkSpec(uint16_t type, uint16_t curve = attest::kEccNistP256);
  // The other high-range templates: RSA-3072 (H-6): nameAlg sha384, 0x000300f2,
  // AES-256-CFB, the H-3 policy; ECC P-521 (H-4): nameAlg sha512, 0x000300f2,
  // AES-256-CFB, TcgEkPolicyOrSha512().
  static SoftKeySpec EkSpecRsa3072();
  static SoftKeySpec EkSpecP521();
  static SoftKey GenerateEk(uint16_t type, uint16_t curve = attest::kEccNistP256);
  // The template `tpm2_createak -G rsa|ecc -g sha256 -s rsassa|ecdsa` uses:
  // nameAlg sha256, fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|
  // restricted|sign (0x00050072), RSA-2048 RSASSA-SHA256 or P-256
  // ECDSA-SHA256, no symmetric, no KDF, empty authPolicy.
  static SoftKeySpec AkSpec(uint16_t type);
  static SoftKey GenerateAk(uint16_t type);

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

// Key pairs for tests that make machines by the dozen. An RSA-2048 key
// takes 0.1-0.5 s to make (several times that on a loaded machine), so a
// test binary that makes a few machines per test spent most of its time
// there. The pool hands out key pairs in rounds: the n-th key of a kind
// (RSA size, or curve) in a round is the pool's n-th key pair of that kind,
// made the first time a round asks for it and the same in every later
// round. Keys of one round are distinct. Rewind() starts a round: call it
// only where no key of the last round meets one of the next (a test whose
// store is its own, as core/testing/core_fixture.h's). Not thread-safe.
class SoftKeyPool {
 public:
  SoftKeyPool();
  ~SoftKeyPool();
  SoftKeyPool(const SoftKeyPool&) = delete;
  SoftKeyPool& operator=(const SoftKeyPool&) = delete;

  // The round's next key pair of spec's kind, with spec's public area.
  SoftKey Next(const SoftKeySpec& spec);
  void Rewind();

 private:
  using Kind = std::tuple<uint16_t, int, uint16_t>;  // type, RSA bits, curve
  struct Keys;
  std::map<Kind, std::unique_ptr<Keys>> keys_;
};

// The process's pool, shared by the test fixtures of one test binary.
SoftKeyPool& TestKeyPool();

struct SoftQuoteSpec {
  std::vector<attest::PcrSelection> selection;
  uint16_t hash_alg = attest::kAlgSha256;  // pcrDigest and signature hash
  uint32_t magic = attest::kTpmGenerated;
  uint16_t type = attest::kStAttestQuote;
  attest::ClockInfo clock{1000, 1, 0, true};
  // The signing key's qualified name (QualifiedName below); empty: a fixed
  // placeholder of the right size (sha256).
  Bytes qualified_signer;
  uint64_t firmware_version = 0x2023000100000000ull;
};

// TPM 2.0 Part 1 §16: the qualified name of an object with name `name` and
// name algorithm `name_alg` under a parent whose qualified name is
// `parent_qn`: nameAlg || H_nameAlg(parent_qn || name). A hierarchy's
// qualified name is its handle (HierarchyQualifiedName).
Bytes QualifiedName(uint16_t name_alg, std::span<const uint8_t> parent_qn, std::span<const uint8_t> name);
inline constexpr uint32_t kRhEndorsement = 0x4000000B;
Bytes HierarchyQualifiedName(uint32_t handle);
// The qualified name of an AK created under the EK `ek` (a primary of the
// endorsement hierarchy): what TPM2_Quote puts in qualifiedSigner.
Bytes AkQualifiedName(const SoftKey& ek, const SoftKey& ak);

// A marshalled TPMS_ATTEST for a quote over `pcrs` with `nonce`.
Bytes MakeQuoteMessage(const SoftQuoteSpec& spec, const attest::PcrValues& pcrs,
                       std::span<const uint8_t> nonce);
// A marshalled TPMS_ATTEST for a certify of `name` with `nonce`.
Bytes MakeCertifyMessage(std::span<const uint8_t> name, std::span<const uint8_t> nonce,
                         uint16_t type = attest::kStAttestCertify);

}  // namespace rackgate::testing

#endif  // RACKGATE_ATTEST_TESTING_SOFT_TPM_H_
