// TPM attestation evidence: AK attribute policy, TPMS_ATTEST and TPMT_SIGNATURE
// parsing, and verification of TPM2_Quote and TPM2_Certify results against an
// AK. See docs/verification.md for why each check exists.
#ifndef RACKGATE_ATTEST_QUOTE_H_
#define RACKGATE_ATTEST_QUOTE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// TPM_GENERATED_VALUE and the TPMI_ST_ATTEST tags we verify.
inline constexpr uint32_t kTpmGenerated = 0xff544347;
inline constexpr uint16_t kStAttestCertify = 0x8017;
inline constexpr uint16_t kStAttestQuote = 0x8018;

// Checks that `ak` is fit to be an attestation key: a restricted signing key
// (not a decryption key) that never left the TPM (fixedTPM, fixedParent,
// sensitiveDataOrigin); RSA >= 2048 bits or ECC P-256/P-384; name algorithm
// sha256 or stronger. Fails with kVerificationFailed and one of the reasons
// ak_not_restricted_signing, ak_decrypt_key, ak_not_fixed_tpm,
// ak_not_fixed_parent, ak_not_sensitive_data_origin, ak_key_too_weak,
// ak_curve_unsupported, ak_name_alg_weak.
Status CheckAkPolicy(const TpmPublic& ak);

// TPMS_CLOCK_INFO.
struct ClockInfo {
  uint64_t clock = 0;
  uint32_t reset_count = 0;
  uint32_t restart_count = 0;
  bool safe = false;
};

// A TPMS_ATTEST reduced to what the verifiers use.
struct TpmsAttest {
  uint32_t magic = 0;
  uint16_t type = 0;
  Bytes qualified_signer;
  Bytes extra_data;
  ClockInfo clock;
  uint64_t firmware_version = 0;
  // type == kStAttestQuote
  std::vector<PcrSelection> pcr_select;
  Bytes pcr_digest;
  // type == kStAttestCertify
  Bytes certified_name;
  Bytes certified_qualified_name;
};

// Parses a marshalled TPMS_ATTEST (`tpm2_quote -m`, `tpm2_certify -o`). Checks
// structure only (exactly consumed, known attestation type); the magic and the
// type's meaning are the verifier's business. kInvalidArgument
// ("attest_malformed") on failure.
Result<TpmsAttest> ParseTpmsAttest(std::span<const uint8_t> data);

// A TPMT_SIGNATURE: RSASSA/RSAPSS (sig) or ECDSA (r, s).
struct TpmtSignature {
  uint16_t sig_alg = kAlgNull;
  uint16_t hash_alg = kAlgNull;
  Bytes rsa_sig;
  Bytes ecc_r;
  Bytes ecc_s;
};

// Parses a marshalled TPMT_SIGNATURE. kInvalidArgument ("signature_malformed")
// for bad bytes, kUnsupported ("signature_scheme_unsupported") for schemes other
// than RSASSA, RSAPSS and ECDSA.
Result<TpmtSignature> ParseTpmtSignature(std::span<const uint8_t> data);

// H_hash_alg(value of each selected PCR, in selection order) — TPM2_Quote's
// pcrDigest. kInvalidArgument ("pcr_values_incomplete") when `pcrs` lacks a
// selected PCR or holds a value of the wrong size for its bank.
Result<Bytes> ComputePcrDigest(uint16_t hash_alg, const std::vector<PcrSelection>& selection,
                               const PcrValues& pcrs);

// A key that verifies TPM signatures, built once from a public area so that a
// session can verify several structures without rebuilding it. Immutable after
// construction; safe to use from several threads at once.
class VerifyKey {
 public:
  // kUnsupported/kInvalidArgument when `pub` is not a usable RSA or ECC key.
  // Does not apply CheckAkPolicy (callers decide which policy applies).
  static Result<VerifyKey> FromTpmPublic(const TpmPublic& pub);

  VerifyKey(VerifyKey&&) noexcept;
  VerifyKey& operator=(VerifyKey&&) noexcept;
  VerifyKey(const VerifyKey&) = delete;
  VerifyKey& operator=(const VerifyKey&) = delete;
  ~VerifyKey();

  const TpmPublic& pub() const;

  // Verifies that `sig` signs `message` with this key. The scheme must suit
  // the key (RSASSA/RSAPSS for RSA, ECDSA for ECC), equal the key's own scheme
  // when it has one, and hash with sha256 or stronger. RSAPSS is verified with
  // a salt as long as the digest, as the TPM makes it. Fails with
  // kVerificationFailed ("signature_invalid", "signature_scheme_mismatch") or
  // kUnsupported ("signature_scheme_unsupported").
  Status Verify(std::span<const uint8_t> message, const TpmtSignature& sig) const;

 private:
  struct Impl;
  explicit VerifyKey(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What a verified quote says.
struct VerifiedQuote {
  ClockInfo clock;  // for monotonic checks against the last attestation
  uint64_t firmware_version = 0;
  std::vector<PcrSelection> selection;
  PcrValues pcrs;  // exactly the quoted PCRs (a subset of the input)
  uint16_t hash_alg = kAlgNull;  // the signature's hash, also the pcrDigest's
};

// Verifies a TPM2_Quote: `message` is the TPMS_ATTEST, `signature` the
// TPMT_SIGNATURE, `pcrs` the PCR values (at least every selected PCR), `nonce`
// the expected extraData, `required` the PCRs that must be in the quote's
// selection. Checks, in order: structure, the signature by `ak`, magic
// TPM_GENERATED, type QUOTE, extraData == nonce (constant time), every
// required PCR selected, pcrDigest == H(selected PCR values).
// Reasons: attest_malformed, signature_malformed (kInvalidArgument);
// signature_invalid, signature_scheme_mismatch, quote_magic_invalid,
// quote_type_invalid, quote_nonce_mismatch, quote_pcr_not_selected,
// quote_pcr_digest_mismatch (kVerificationFailed); pcr_values_incomplete
// (kInvalidArgument).
Result<VerifiedQuote> VerifyQuote(const VerifyKey& ak, std::span<const uint8_t> message,
                                  std::span<const uint8_t> signature, const PcrValues& pcrs,
                                  std::span<const uint8_t> nonce,
                                  const std::vector<PcrSelection>& required);

// What a verified TPM2_Certify says.
struct VerifiedCertify {
  ClockInfo clock;
  Bytes certified_name;
};

// Verifies a TPM2_Certify by `ak` over the object `certified`: signature,
// magic, type CERTIFY, extraData == nonce, attested name == ObjectName(certified).
// Reasons as VerifyQuote plus certify_type_invalid, certify_nonce_mismatch,
// certify_name_mismatch.
Result<VerifiedCertify> VerifyCertify(const VerifyKey& ak, std::span<const uint8_t> message,
                                      std::span<const uint8_t> signature,
                                      const TpmPublic& certified, std::span<const uint8_t> nonce);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_QUOTE_H_
