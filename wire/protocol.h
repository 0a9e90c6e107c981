// The attestation protocol's JSON bodies (docs/protocol.md) as typed values,
// each with an encoder and a decoder: what the machines send, decoded as
// strictly as the appliance needs, and what they get back, decoded as the
// agent needs. Every end of the protocol (rackgated, rackgate-agent,
// boot-storm, the lab's test client) goes through these.
#ifndef RACKGATE_WIRE_PROTOCOL_H_
#define RACKGATE_WIRE_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attest/tpm.h"
#include "base/size_limits.h"
#include "base/status.h"

namespace rackgate::wire {

using attest::Bytes;

// Bounds on decoded fields; those the store keeps too come from base/size_limits.h.
using limits::kMaxAddresses;
using limits::kMaxCertificate;
using limits::kMaxSessionId;
using limits::kMaxTpm2bPublic;
inline constexpr size_t kMaxIntermediates = 4;
inline constexpr size_t kMaxAttest = 2048;
inline constexpr size_t kMaxSignature = 1024;
inline constexpr size_t kMaxSecret = 64;
inline constexpr size_t kMaxEventLog = 16 << 20;
inline constexpr size_t kMaxPcrSignatureField = 64 << 10;  // compact JSON
inline constexpr size_t kMaxNonce = 64;          // TPM2B_DATA
inline constexpr size_t kMaxCredential = 4096;   // the tpm2_makecredential file
inline constexpr size_t kMaxCsrPem = 64 * 1024;  // one CSR in PEM
inline constexpr size_t kMaxUsages = 16;
inline constexpr size_t kMaxUsageChars = 64;
inline constexpr size_t kMaxPemChars = 256 * 1024;  // an issued certificate or CA
inline constexpr size_t kMaxAnswerField = 256;      // other strings in answers

// How the decoders fail. Requests (what the appliance receives):
// kInvalidArgument with reason bad_json (not a JSON object), field_missing or
// field_invalid (a wrong type, a bound exceeded, an unknown field), the
// message naming the field. Answers (what the agent receives): the same
// reasons, but unknown fields are ignored, so that the appliance may add to
// an answer without breaking deployed agents; the agent reports any of them
// as bad_response.

// --- 2. Challenge: POST /v1/attest/challenge --------------------------------

struct ChallengeRequest {
  Bytes ek_public;
  std::optional<Bytes> ek_certificate;
  std::vector<Bytes> ek_intermediates;
  Bytes ak_public;
  bool operator==(const ChallengeRequest&) const = default;
};
std::string EncodeChallengeRequest(const ChallengeRequest& r);
Result<ChallengeRequest> DecodeChallengeRequest(std::string_view body);
// The same as DecodeChallengeRequest (the name the appliance calls).
Result<ChallengeRequest> ParseChallengeRequest(std::string_view body);

// The appliance's answer to a challenge.
struct Challenge {
  std::string session;
  Bytes nonce;
  std::vector<attest::PcrSelection> pcr_selection;
  Bytes credential;  // the tpm2_makecredential file (docs/formats.md)
  long expires_in = 0;
};
std::string EncodeChallenge(const Challenge& c);
// Every field but expires_in is required; pcr_selection must parse.
Result<Challenge> DecodeChallenge(std::string_view body);

// --- 3. Evidence: POST /v1/attest/evidence ----------------------------------

struct EvidenceRequest {
  std::string session;
  Bytes secret;
  Bytes quote;
  Bytes signature;
  attest::PcrValues pcrs;
  std::optional<Bytes> event_log;
  // "pcr_signature": the `systemd-measure sign` document the machine booted
  // with (/run/systemd/tpm2-pcr-signature.json), as compact JSON text. The
  // decoder checks only that it is an object of at most
  // kMaxPcrSignatureField bytes; wire/pcr_signature_json.h reads it.
  std::optional<std::string> pcr_signature;
  bool operator==(const EvidenceRequest&) const = default;
};
// It carries the activated secret: the caller wipes the result.
std::string EncodeEvidenceRequest(const EvidenceRequest& r);
Result<EvidenceRequest> DecodeEvidenceRequest(std::string_view body);
// The same as DecodeEvidenceRequest (the name the appliance calls).
Result<EvidenceRequest> ParseEvidenceRequest(std::string_view body);

// The answer to good evidence: a bearer token bound to the machine.
struct Token {
  std::string token;  // a credential: never logged
  long expires_in = 0;
  std::string hostname;
  std::string state;
  // The appliance CA bundle the machine should trust from now on
  // (docs/protocol.md, "ca_bundle"): PEM text of 1 to kMaxCaBundleCerts CA
  // certificates, old and next during a rotation; "" from an appliance
  // before 0.2.0 (and then not encoded).
  std::string ca_bundle;
  bool operator==(const Token&) const = default;
};
inline constexpr size_t kMaxCaBundleBytes = 65536;
inline constexpr size_t kMaxCaBundleCerts = 8;
std::string EncodeToken(const Token& t);
// The token is required and must be printable ASCII without spaces (it goes
// into an HTTP header); hostname and state are made printable. ca_bundle,
// when present and not "", is at most kMaxCaBundleBytes of printable ASCII
// and line breaks holding 1 to kMaxCaBundleCerts PEM certificate blocks
// (field_invalid otherwise); whether each is a CA is the agent's check.
Result<Token> DecodeToken(std::string_view body);

// --- GET /v1/machine --------------------------------------------------------

struct MachineRecord {
  std::string hostname;
  std::string pool;
  std::string state;
  // The pool asks for a TPM-resident client key (docs/csr.md).
  bool require_tpm_key = false;
  // Renewal is open once at most this fraction of a certificate's validity
  // is left (docs/csr.md, "Renewal"): the agent renews no earlier.
  double renew_fraction = 1.0 / 3.0;
  // Who issues the kubelet's certificates (docs/kubernetes.md): "signer"
  // (rackgate: POST /v1/machine/csr) or "approver" (the cluster's signer;
  // the agent registers the kubelet's key: POST /v1/machine/kubelet-key).
  // An appliance before approver mode sends none: "signer".
  std::string kubelet_certificates = "signer";
  // Where the kubelet finds its cluster (docs/agent.md, "Where the API
  // server and node addresses come from"): the pool's `apiserver` setting
  // ("" when unset), for the kubeconfig the agent writes in signer mode, and
  // the machine's enrolled IP addresses (InternalIP, ExternalIP; at most
  // kMaxAddresses), the IP SANs its serving CSR asks for. The agent's
  // --apiserver and --node-ip, when given, win. An appliance before these
  // sends neither: "" and none.
  std::string apiserver;
  std::vector<std::string> addresses;
  bool operator==(const MachineRecord&) const = default;
};
std::string EncodeMachineRecord(const MachineRecord& m);
// The hostname must be a DNS name (ValidHostname): it goes into the CSRs.
// apiserver must be "" or pass ValidApiserverUrl (it goes into a
// kubeconfig), each address must be an IPv4 or IPv6 literal (it goes into a
// CSR), at most kMaxAddresses of them: field_invalid otherwise.
Result<MachineRecord> DecodeMachineRecord(std::string_view body);

// True for a DNS name a node may have (RFC 1123 labels, lower or upper
// case, at most 253 characters).
bool ValidHostname(std::string_view name);

// True for an API server URL safe to put in a kubeconfig: https://, a
// host, at most 2048 characters, no whitespace, control character, quote or
// backslash (YAML and shell need none). One check for the agent's
// --apiserver, the pool setting `apiserver` and the record's field.
bool ValidApiserverUrl(std::string_view url);

// True for an IPv4 or IPv6 literal as inet_pton reads it ("10.0.0.300" is
// not).
bool ValidIpLiteral(const std::string& text);

// --- 5. CSR vouching: POST /v1/machine/csr ----------------------------------

// A TPM-resident key: its TPM2B_PUBLIC and the TPM2_Certify over it by the AK.
struct TpmKeyProof {
  Bytes public_area;
  Bytes certify_info;
  Bytes certify_signature;
  bool operator==(const TpmKeyProof&) const = default;
};

// A renewal: the machine's current certificate of the same kind, and a
// signature by that certificate's key over RenewalSignedMessage() (proof that
// the machine still holds the key it is renewing).
struct RenewalProof {
  std::string certificate_pem;
  Bytes signature;  // DER ECDSA, or PKCS#1 v1.5 for an RSA key; SHA-256
  bool operator==(const RenewalProof&) const = default;
};

// What the current key signs for a renewal: a fixed label, the session's
// nonce (the token's attestation: fresh) and the SHA-256 of the new CSR's
// SubjectPublicKeyInfo (DER), so a proof is good for this new key only.
//   "rackgate-renewal-v1" 0x00 | u16 BE len(nonce) | nonce | SHA-256(spki)
Bytes RenewalSignedMessage(std::span<const uint8_t> nonce, std::span<const uint8_t> new_spki_sha256);

struct CsrRequest {
  std::string signer;
  std::string csr_pem;
  // Absent: the signer's defaults, which the appliance chooses.
  std::optional<std::vector<std::string>> usages;
  std::optional<TpmKeyProof> tpm_key;
  // Present when the machine renews a certificate it holds.
  std::optional<RenewalProof> renewal;
  bool operator==(const CsrRequest&) const = default;
};
std::string EncodeCsrRequest(const CsrRequest& r);
// signer and csr are required strings (field_missing); usages at most
// kMaxUsages strings of at most kMaxUsageChars; tpm_key needs all three
// base64 members (field_invalid). A csr over kMaxCsrPem characters is
// csr_malformed, as the appliance has always answered it. The signer's name
// is not checked here: that is the CSR rules' decision.
Result<CsrRequest> DecodeCsrRequest(std::string_view body);

// The answer: the signed certificate.
struct IssuedCertificate {
  std::string certificate_pem;
  std::string ca_pem;
  std::string serial;
  long long not_before = 0;
  long long not_after = 0;
  bool tpm_resident = false;
  std::string state;  // the machine's state after issuing
  bool operator==(const IssuedCertificate&) const = default;
};
std::string EncodeIssuedCertificate(const IssuedCertificate& c);
// certificate and ca are required; serial and state are made printable.
Result<IssuedCertificate> DecodeIssuedCertificate(std::string_view body);

// --- Approver mode: POST /v1/machine/kubelet-key (docs/kubernetes.md) -------
// The request is a CsrRequest (the kubelet's key in a CSR of the kubelet's
// subject, its self-signature the proof of possession, a TPM proof when
// TPM-resident; no renewal). The answer: the registered key.
struct KubeletKeyRegistered {
  std::string kind;        // "client" or "serving"
  std::string key_sha256;  // lower-case hex of the SubjectPublicKeyInfo's SHA-256
  bool tpm_resident = false;
  long long registered_at = 0;
  bool operator==(const KubeletKeyRegistered&) const = default;
};
std::string EncodeKubeletKeyRegistered(const KubeletKeyRegistered& k);
// kind and key_sha256 (64 hex digits) are required.
Result<KubeletKeyRegistered> DecodeKubeletKeyRegistered(std::string_view body);

// --- Provisioning reports: POST /v1/machine/report --------------------------

// What the agent did on this run, so an operator sees why a node is stuck
// without its console (docs/protocol.md, "Reports").
struct ProvisioningReport {
  std::string outcome;  // "ok" or "failed"
  std::string step;     // the step that failed, or the last one run: attest, config, csr
  std::string reason;   // the failure's reason code; "" when ok
  std::string message;  // at most kMaxReportMessage printable characters
  int exit_status = 0;  // the agent's exit status for this run
  // What was done, in order, e.g. "config_applied", "client_certificate_kept",
  // "client_certificate_renewed", "serving_certificate_written".
  std::vector<std::string> done;
  bool operator==(const ProvisioningReport&) const = default;
};
inline constexpr size_t kMaxReportMessage = 512;
inline constexpr size_t kMaxReportDone = 16;
std::string EncodeProvisioningReport(const ProvisioningReport& r);
// outcome ok|failed, step and reason [a-z0-9_] of at most 64 characters,
// message printable ASCII, exit_status 0..255, done at most kMaxReportDone
// names like step's (field_invalid otherwise; unknown fields refused).
Result<ProvisioningReport> DecodeProvisioningReport(std::string_view body);
// The answer to a recorded report: {"recorded":true}.
std::string EncodeReportRecorded();

}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_PROTOCOL_H_
