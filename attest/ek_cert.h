// EK certificates: path validation of a TPM endorsement-key certificate to the
// operator's manufacturer roots, the TCG EK Credential Profile checks, and the
// match between a certificate's key and a TPM's EK public area.
#ifndef RACKGATE_ATTEST_EK_CERT_H_
#define RACKGATE_ATTEST_EK_CERT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::attest {

// Input limits, checked before any parsing. A real EK certificate is 0.8–2 KiB.
inline constexpr size_t kMaxEkCertBytes = 16 * 1024;
// Intermediates a node may present with its EK certificate (Intel PTT and AMD
// fTPM chains go through per-part CAs that the operator may not have).
inline constexpr size_t kMaxPresentedIntermediates = 4;
// A trust-store file (a PEM bundle) may be larger than one certificate.
inline constexpr size_t kMaxTrustStoreFileBytes = 1024 * 1024;

// Stable reasons (Status::reason()) of this module.
// Certificate input:
inline constexpr char kEkCertMalformed[] = "ek_cert_malformed";  // kInvalidArgument
// Path validation (kVerificationFailed):
inline constexpr char kEkCertUntrusted[] = "ek_cert_untrusted";
inline constexpr char kEkCertMissingIntermediate[] = "ek_cert_missing_intermediate";
inline constexpr char kEkCertExpired[] = "ek_cert_expired";
inline constexpr char kEkCertNotYetValid[] = "ek_cert_not_yet_valid";
inline constexpr char kEkCertSignatureInvalid[] = "ek_cert_signature_invalid";
inline constexpr char kEkCertBadBasicConstraints[] = "ek_cert_bad_basic_constraints";
inline constexpr char kEkCertWeakCrypto[] = "ek_cert_weak_crypto";
inline constexpr char kEkCertUnhandledCriticalExtension[] = "ek_cert_unhandled_critical_extension";
// TCG EK profile (kVerificationFailed):
inline constexpr char kEkCertNotEk[] = "ek_cert_not_ek";
// Keys:
inline constexpr char kEkKeyUnsupported[] = "ek_key_unsupported";  // kUnsupported
inline constexpr char kEkPublicMismatch[] = "ek_public_mismatch";  // kVerificationFailed
// Trust store configuration:
inline constexpr char kEkTrustStoreIo[] = "ek_trust_store_io";            // kIoError
inline constexpr char kEkTrustStoreInvalid[] = "ek_trust_store_invalid";  // kInvalidArgument

// TCG OIDs used here (TCG EK Credential Profile for TPM 2.0).
inline constexpr char kOidTcgKpEkCertificate[] = "2.23.133.8.1";  // EKU
inline constexpr char kOidTcgAtTpmManufacturer[] = "2.23.133.2.1";
inline constexpr char kOidTcgAtTpmModel[] = "2.23.133.2.2";
inline constexpr char kOidTcgAtTpmVersion[] = "2.23.133.2.3";
// The profile marks an EK certificate's certificatePolicies with a userNotice
// whose explicitText is this string (there is no TCG-assigned policy OID for
// EK certificates; the policyIdentifier is the issuer's own CP).
inline constexpr char kTcgEkPolicyNotice[] = "TCPA Trusted Platform Module Endorsement";

// Relaxations an operator may grant one anchor (docs/ek-vendors.md, "Verification
// rules (attest/)"); the names are what the daemon config, the CLI and the
// records say.
// SHA-1 (or other weaker-than-level-1) signatures on certificates of a path
// ending at this anchor.
inline constexpr char kEkRelaxSha1[] = "sha1";
// An expired CA certificate (never the leaf) in such a path.
inline constexpr char kEkRelaxExpiredCa[] = "expired-ca";
// A leaf with neither the TCG EK EKU nor the EK policy (cloud vTPM profiles).
inline constexpr char kEkRelaxNoEkMarks[] = "no-ek-marks";

// One trust anchor: every certificate configured in ek_roots that is a CA.
// Strings are escaped for display, as in EkCertInfo.
struct EkAnchor {
  std::string subject;       // RFC 2253
  std::string issuer;        // RFC 2253
  bool self_signed = false;  // false: an intermediate or cross-signed CA used as an anchor
  std::string key;           // "RSA-2048", "RSA-4096", "ECC P-256", "ECC P-384", "ECC P-521"
  int64_t not_after = 0;     // unix seconds
  std::string sha256;        // lower-case hex SHA-256 of the DER: the anchor's name
  std::string source;        // the file it was loaded from ("" when added from memory)
  std::vector<std::string> relaxations;  // granted by AllowForAnchor, in the order granted
};

// What an EK certificate says, reduced to what a verifier or an operator needs.
// Strings that come from the certificate are escaped for display: bytes outside
// printable ASCII appear as \xNN, so they are safe to log and print.
struct EkCertInfo {
  // From the SubjectAltName directoryName (TCG attributes 2.23.133.2.1/2/3);
  // empty when the certificate does not carry them.
  std::string tpm_manufacturer;  // e.g. "id:49465800"
  std::string tpm_model;
  std::string tpm_version;

  std::string subject;     // RFC 2253; may be empty or "CN=unknown"
  std::string issuer;      // RFC 2253
  std::string serial_hex;  // upper-case hex, "-" prefixed if negative
  int64_t not_before = 0;  // unix seconds
  int64_t not_after = 0;

  // Marks of an EK certificate: the EKU tcg-kp-EKCertificate, and a
  // certificate policy carrying kTcgEkPolicyNotice or (VerifyEkCertificate
  // only) an OID given to EkTrustStore::AcceptEkPolicy.
  bool has_ek_eku = false;
  bool has_ek_policy = false;

  // The subject key. key_type is kAlgRsa or kAlgEcc for a key this module
  // supports (RSA-2048 or RSA-3072 with an exponent below 2^32; ECC P-256,
  // P-384 or P-521), and kAlgNull for any other key, whose size key_bits
  // still reports.
  uint16_t key_type = kAlgNull;
  uint16_t ecc_curve = 0;  // kEccNistP256 / P384 / P521 when key_type == kAlgEcc
  int key_bits = 0;
  Bytes rsa_modulus;  // big-endian, exactly key_bits / 8 bytes
  uint32_t rsa_exponent = 0;
  Bytes ecc_x;  // big-endian, left-padded to the curve's field size
  Bytes ecc_y;

  Bytes der;  // the certificate exactly as received (DER, also for PEM input)

  // Set by VerifyEkCertificate on success (empty after ParseEkCertificate):
  std::string anchor_sha256;  // the anchor the path ended at (EkAnchor::sha256)
  std::string anchor_subject;
  // The relaxations of that anchor this certificate needed (kEkRelax* names);
  // empty when it verified without any.
  std::vector<std::string> relaxations_used;
};

// The configured manufacturer roots (trust anchors) and known intermediates
// (untrusted: used only to build a path, never as an anchor).
//
// Thread safety: VerifyEkCertificate may run concurrently on one const store;
// the Add* methods must not run concurrently with anything else on it.
class EkTrustStore {
 public:
  EkTrustStore();  // empty: every certificate fails as untrusted
  ~EkTrustStore();
  EkTrustStore(EkTrustStore&& other) noexcept;
  EkTrustStore& operator=(EkTrustStore&& other) noexcept;
  EkTrustStore(const EkTrustStore&) = delete;
  EkTrustStore& operator=(const EkTrustStore&) = delete;

  // Reads the anchors (ek_roots) and intermediates from the named paths. Each
  // path is a file (PEM holding one or more CERTIFICATE blocks, or one DER
  // certificate) or a directory whose regular files (names starting with '.'
  // skipped) are such files. Every CA certificate of the roots becomes an
  // anchor. A file that is unreadable, holds something other than
  // certificates or no CA, and a non-CA certificate among the roots, are
  // skipped with a LoadNotes() line. Fails with kIoError (ek_trust_store_io)
  // when a configured path does not exist or the one file it names cannot be
  // read, and kInvalidArgument (ek_trust_store_invalid) when no anchor results.
  static Result<EkTrustStore> Load(const std::vector<std::string>& root_paths,
                                   const std::vector<std::string>& intermediate_paths);

  // Adds the certificates of one PEM bundle or one DER certificate. AddRoot
  // makes every CA certificate of it an anchor (self-signed or not) and skips
  // the others with a note; kInvalidArgument (ek_trust_store_invalid), adding
  // nothing, when the input is not certificates or holds no CA.
  // AddIntermediate keeps them all as untrusted path helpers.
  Status AddRoot(std::span<const uint8_t> der_or_pem);
  Status AddIntermediate(std::span<const uint8_t> der_or_pem);

  // Accepts a certificate policy OID (dotted form) as the mark of an EK
  // certificate that has no EKU extension, e.g. a vendor's EK CP. kInvalidArgument
  // (ek_trust_store_invalid) when the text is not an OID.
  Status AcceptEkPolicy(std::string_view dotted_oid);

  size_t root_count() const;  // == Anchors().size()
  size_t intermediate_count() const;

  // Every CA certificate in ek_roots is an anchor (self-signed or not: a
  // vendor CA issued by a root the operator does not have, a cross-signed CA).
  // A certificate in ek_roots that is not a CA is skipped and noted, never a
  // reason to refuse the whole folder. In the order loaded.
  std::vector<EkAnchor> Anchors() const;
  // What loading skipped, one printable line each ("file: subject: why").
  std::vector<std::string> LoadNotes() const;
  // Grants `relaxation` (one of the kEkRelax* names) to the anchor whose DER
  // has this SHA-256 (hex, any case). Granting one twice is no error.
  // kInvalidArgument (ek_trust_store_invalid) naming the problem when no
  // anchor has it or the name is unknown; nothing changes then.
  Status AllowForAnchor(std::string_view anchor_sha256_hex, std::string_view relaxation);

 private:
  struct Impl;
  friend Result<EkCertInfo> VerifyEkCertificate(const EkTrustStore&, std::span<const uint8_t>,
                                                int64_t, std::span<const Bytes>);
  std::unique_ptr<Impl> impl_;
};

// Parses an EK certificate (DER, or PEM holding exactly one CERTIFICATE block;
// at most kMaxEkCertBytes; trailing bytes refused) and reports its facts
// without judging them, so a CLI can show what a refused certificate says.
// Fails only with kInvalidArgument (ek_cert_malformed).
Result<EkCertInfo> ParseEkCertificate(std::span<const uint8_t> der_or_pem);

// Validates an EK certificate at time `now_unix` (unix seconds):
//   - a path to an anchor (any CA certificate of ek_roots; the first one
//     reached from the leaf) through configured or presented intermediates, with every certificate inside its validity period, every
//     signature valid, every issuer a CA (basicConstraints CA:TRUE) and keys
//     and digests of at least 80-bit strength (SHA-1 signatures refused);
//   - no TLS or other X.509 purpose is required (EK certificates have none);
//   - the leaf is not a CA;
//   - the leaf's critical extensions are ones OpenSSL enforces or ones the TCG
//     EK profile defines (subjectDirectoryAttributes, authorityKeyIdentifier,
//     authorityInfoAccess); issuers may carry no unhandled critical extension;
//   - the leaf is marked as an EK certificate: its EKU contains
//     tcg-kp-EKCertificate, or it has no EKU extension and a certificate
//     policy carrying kTcgEkPolicyNotice or an OID given to AcceptEkPolicy;
//   - its key is supported (RSA-2048/3072, ECC P-256/P-384/P-521).
// `presented_intermediates` are untrusted certificates sent with the EK
// certificate (DER or PEM, at most kMaxPresentedIntermediates).
// Revocation is not checked. On failure the Status names the certificate
// (issuer and serial) and carries one of the reasons above.
Result<EkCertInfo> VerifyEkCertificate(const EkTrustStore& store,
                                       std::span<const uint8_t> cert_der_or_pem, int64_t now_unix,
                                       std::span<const Bytes> presented_intermediates = {});

// Checks that a TPM's EK public area holds the certificate's key: RSA modulus
// and exponent, or ECC curve and point (coordinates compared as fixed-width
// big-endian numbers). kUnsupported (ek_key_unsupported) when either key is not
// RSA-2048/3072 or ECC P-256/P-384/P-521; kVerificationFailed (ek_public_mismatch) when
// the keys differ. The message never contains either key.
Status CheckEkPublicMatchesCertificate(const TpmPublic& ek, const EkCertInfo& cert);

}  // namespace rackgate::attest

#endif  // RACKGATE_ATTEST_EK_CERT_H_
