// Kubelet CSR vouching: parsing a PKCS#10 request, the rules that bind it to
// an attested machine (what OpenShift's cluster-machine-approver guesses from
// Machine objects, decided here from the enrollment), and the proof that the
// request's key lives in that machine's TPM. Pure: no I/O, no storage, no
// HTTP. Signing is in core/signer.h.
#ifndef RACKGATE_CORE_CSR_H_
#define RACKGATE_CORE_CSR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

struct evp_pkey_st;
struct X509_pubkey_st;

namespace rackgate::core::csr {

using Bytes = std::vector<uint8_t>;

// Largest PEM text ParseCsr looks at. A kubelet CSR is well under 2 KiB; the
// bound keeps a hostile body from costing more than a bounded parse.
inline constexpr size_t kMaxCsrPemBytes = 64 * 1024;

// The two Kubernetes signers whose requests rackgate vouches for.
enum class Kind { kClient, kServing };
inline constexpr std::string_view kClientSignerName = "kubernetes.io/kube-apiserver-client-kubelet";
inline constexpr std::string_view kServingSignerName = "kubernetes.io/kubelet-serving";

// kInvalidArgument ("csr_signer_unknown") for any other signer name.
Result<Kind> KindFromSigner(std::string_view signer_name);
std::string_view SignerName(Kind kind);

// Key usages in Kubernetes' spelling (certificates.k8s.io/v1 KeyUsage).
inline constexpr std::string_view kUsageDigitalSignature = "digital signature";
inline constexpr std::string_view kUsageKeyEncipherment = "key encipherment";
inline constexpr std::string_view kUsageClientAuth = "client auth";
inline constexpr std::string_view kUsageServerAuth = "server auth";

enum class KeyAlgorithm { kRsa, kEcdsa, kOther };

// A parsed and self-signature-verified certificate request. Every value comes
// from the requester and is untrusted until Check has passed; texts may hold
// any bytes (escape them before logging). Copyable; copies share the key.
struct Csr {
  // Subject attribute values, in the order the subject lists them, all of
  // them, so that a duplicate or an extra value is visible.
  std::vector<std::string> common_names;
  std::vector<std::string> organizations;
  // Any other subject attribute, as its short name ("OU", "C") or dotted OID;
  // the value is left out on purpose (nothing needs it but a log).
  std::vector<std::string> other_subject_attributes;

  // Subject alternative names by kind, from the extensionRequest. IP
  // addresses as canonical text (inet_ntop: "10.0.0.1", "fd00::1"); every IP
  // entry is 4 or 16 bytes (ParseCsr refuses other lengths).
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::vector<std::string> emails;
  std::vector<std::string> uris;
  // Other GeneralName kinds, by kind only: "otherName", "x400Address",
  // "directoryName", "ediPartyName", "registeredID".
  std::vector<std::string> other_names;

  // From the extensionRequest, in Kubernetes' spelling where it has one
  // ("digital signature", "client auth", ...), else the dotted OID. Empty when
  // the request carries none, as kubelet's do: the usages that count are the
  // Kubernetes CSR object's, which the caller passes to Check.
  bool has_extension_request = false;
  std::vector<std::string> key_usages;
  std::vector<std::string> extended_key_usages;

  KeyAlgorithm key_algorithm = KeyAlgorithm::kOther;
  std::string key_type;  // "RSA", "EC", "ED25519", ... (for messages)
  int key_bits = 0;      // RSA modulus bits, EC field bits
  std::string curve;     // "P-256", "P-384", another curve's short name, or ""
  // The DER SubjectPublicKeyInfo, re-encoded from the parsed key (named
  // curve, uncompressed point), so equal keys have equal bytes whatever
  // encoding the request used.
  Bytes spki_der;
  // The public key. Shared and read-only: never modify it through this
  // pointer. EVP_PKEY is safe to read from several threads at once.
  std::shared_ptr<evp_pkey_st> public_key;
  // The same key as an X509_PUBKEY whose DER is spki_der, for the signer to
  // copy into a certificate without re-encoding the key. Read-only.
  std::shared_ptr<X509_pubkey_st> spki;
};

// Parses one PEM "CERTIFICATE REQUEST" (PKCS#10 v1) and verifies its
// self-signature. Refuses, with kInvalidArgument "csr_malformed": more than
// kMaxCsrPemBytes, no block or more than one PEM block, another PEM type,
// PEM headers, DER that is not exactly one request, an undecodable subject,
// extensionRequest, SAN, key usage or EKU, a SAN iPAddress that is not 4 or
// 16 bytes, a repeated extension, an unreadable key. With
// kVerificationFailed "csr_signature_invalid": a self-signature that does not
// verify or that hashes with MD5 or SHA-1. Key types and sizes are Check's
// business, not the parser's.
Result<Csr> ParseCsr(std::string_view pem);

// What the enrollment store knows about the machine that sent the request.
// Trusted: it comes from the appliance's database, not from the request.
struct MachineFacts {
  std::string hostname;                   // the enrolled node name
  std::vector<std::string> dns_names;     // enrolled DNS names
  std::vector<std::string> ip_addresses;  // enrolled addresses (v4/v6 literals)
  std::string state;                      // storage's state name: "attested", "joined", ...
  std::optional<int64_t> last_attested_at;       // unix seconds
  std::optional<int64_t> client_cert_issued_at;  // unix seconds; reset clears it
};

struct RuleOptions {
  // How long after a successful attestation a client CSR is vouched for. The
  // approver's two hours, counted from a TPM quote instead of from a Machine
  // object's creation.
  int64_t client_window_seconds = 7200;
  // Refuse requests whose key has not been proven TPM-resident (CheckTpmKey).
  bool require_tpm_key = false;
};

// One broken rule. `reason` is stable (metrics, 403 bodies); `message` may
// name the requester's own values (escaped) but never what they were compared
// against (the enrolled names, addresses, hostname).
struct Refusal {
  std::string reason;
  std::string message;
};

// Applies every rule to a request of `kind` whose Kubernetes CSR object asks
// for `usages`, from the machine described by `facts`; `tpm_key_proven` says
// whether CheckTpmKey passed for this request. Returns every violation, in a
// stable order (empty: vouch for it). Reasons:
//   subject:  csr_subject_organization (O is not exactly one "system:nodes"),
//             csr_subject_common_name (CN is not exactly one
//             "system:node:<hostname>"), csr_subject_extra (any other
//             attribute: kubelet sets only O and CN);
//   both:     csr_usages (the usage set, or the request's own KU/EKU, does not
//             fit the kind), csr_state (machine state does not allow the kind),
//             csr_key_unsupported (not ECDSA P-256/P-384 or RSA 2048..8192),
//             csr_tpm_key_required;
//   client:   csr_client_has_sans, csr_window_expired, client_cert_already_issued;
//   serving:  csr_serving_no_sans (no DNS or IP SAN), csr_san_not_enrolled
//             (one per SAN), csr_serving_san_kind (email, URI or other SANs).
std::vector<Refusal> Check(const Csr& csr, Kind kind, const std::vector<std::string>& usages,
                           const MachineFacts& facts, const RuleOptions& options,
                           bool tpm_key_proven, int64_t now);

// Proves that the request's key is a TPM-resident signing key of the machine
// whose attestation key is `ak_tpm2b_public` (the AK of the attested session,
// from the appliance's records, not from the request): a TPM2_Certify
// (`certify_info` TPMS_ATTEST, `certify_signature` TPMT_SIGNATURE) by the AK
// over `key_tpm2b_public` with the session's single-use `nonce`. Checks, in
// order: both public areas parse (tpm2b_public_malformed,
// key_type_unsupported), the AK policy (ak_* reasons of CheckAkPolicy), the
// certify (signature_invalid, certify_nonce_mismatch, certify_name_mismatch,
// ... of VerifyCertify), the key's attributes (csr_tpm_key_attributes:
// fixedTPM, fixedParent, sensitiveDataOrigin and sign set, restricted clear),
// and that the request's key is the TPM key (csr_tpm_key_mismatch).
// Consuming the nonce is the caller's job.
Status CheckTpmKey(std::span<const uint8_t> key_tpm2b_public,
                   std::span<const uint8_t> certify_info,
                   std::span<const uint8_t> certify_signature,
                   std::span<const uint8_t> ak_tpm2b_public, std::span<const uint8_t> nonce,
                   const Csr& csr);

// --- Renewal (docs/csr.md, "Renewal") ---------------------------------------

// A certificate a machine presents as the one it renews. Untrusted until the
// caller found it, byte for byte, among the certificates the appliance
// issued to that machine. Copyable; copies share the key.
struct PresentedCertificate {
  // The serial as the signer records it: 16 bytes, lower-case hex.
  std::string serial_hex;
  Bytes der;
  // The certificate's public key. Read-only, as Csr::public_key.
  std::shared_ptr<evp_pkey_st> public_key;
};

// Parses one PEM "CERTIFICATE" (at most kMaxCsrPemBytes, exactly one block,
// no PEM headers, DER that is exactly one certificate). Refuses with
// kVerificationFailed "renewal_proof_invalid": anything else, a serial that
// does not fit the signer's 16 bytes, or a key that is not EC or RSA (the
// only kinds Check lets through, so no certificate of ours has another).
Result<PresentedCertificate> ParsePresentedCertificate(std::string_view pem);

// The possession proof: `signature` (DER ECDSA, or RSA PKCS#1 v1.5; SHA-256)
// verifies with the certificate's key over `message`
// (wire::RenewalSignedMessage of the session nonce and the new key).
// kVerificationFailed "renewal_proof_invalid" otherwise.
Status CheckRenewalSignature(const PresentedCertificate& cert, std::span<const uint8_t> message,
                             std::span<const uint8_t> signature);

// Whether a certificate valid from `not_before` to `not_after` may be renewed
// at `now`: once at most `fraction` of its validity is left, or after it
// expired (now >= not_after - fraction * (not_after - not_before)).
bool RenewalDue(int64_t not_before, int64_t not_after, double fraction, int64_t now);

}  // namespace rackgate::core::csr

#endif  // RACKGATE_CORE_CSR_H_
