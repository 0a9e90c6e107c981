// The appliance's API from the node's side (docs/protocol.md): request
// bodies, answers parsed strictly, and every HTTP outcome mapped to what the
// agent does next (failure.h). Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_PROTOCOL_H_
#define RACKGATE_AGENT_PROTOCOL_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/protocol.h is internal to rackgate-agent"
#endif

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/client.h"
#include "agent/failure.h"
#include "attest/tpm.h"

namespace rackgate::agent {

using attest::Bytes;

inline constexpr char kIgnitionAccept[] = "application/vnd.coreos.ignition+json;version=3.3.0";

// Maps one exchange to the agent's next move: a 2xx answer is returned; a
// 503 and 429 are kWait (with the parsed Retry-After); another 5xx, no
// answer, or a 403 about the session (session_used, session_expired,
// session_unknown: start again from the challenge) is kRetry; another 4xx is
// kRefused with the appliance's reason; an answer over the
// size limit or any other status is kRefused ("bad_response").
Outcome<HttpResponse> Classify(Result<HttpResponse> exchange, std::time_t now);

// The error body {"error": {"reason", "message"}}, made printable; "" when
// absent.
struct ErrorBody {
  std::string reason;
  std::string message;
};
ErrorBody ParseErrorBody(std::string_view body);

struct ChallengeRequest {
  Bytes ek_public;
  std::optional<Bytes> ek_certificate;
  std::vector<Bytes> ek_intermediates;
  Bytes ak_public;
};
std::string EncodeChallengeRequest(const ChallengeRequest& r);

struct Challenge {
  std::string session;
  Bytes nonce;
  std::vector<attest::PcrSelection> pcr_selection;
  Bytes credential;  // the tpm2_makecredential file (docs/formats.md)
};
// kRefused ("bad_response") unless every field is present and well-formed.
Outcome<Challenge> ParseChallenge(std::string_view body);

struct EvidenceRequest {
  std::string session;
  Bytes secret;
  Bytes quote;
  Bytes signature;
  attest::PcrValues pcrs;
  std::optional<Bytes> event_log;
};
// The JSON body. It carries the activated secret: the caller wipes it.
std::string EncodeEvidenceRequest(const EvidenceRequest& r);

struct Token {
  std::string token;  // a credential: never logged
  long expires_in = 0;
  std::string hostname;
  std::string state;
};
Outcome<Token> ParseToken(std::string_view body);

struct MachineRecord {
  std::string hostname;
  std::string pool;
  std::string state;
  // The pool asks for a TPM-resident client key (docs/csr.md).
  bool require_tpm_key = false;
};
// GET /v1/machine. The hostname must be a DNS name (it goes into the CSRs).
Outcome<MachineRecord> ParseMachineRecord(std::string_view body);

struct CsrRequest {
  std::string signer;
  std::string csr_pem;
  std::vector<std::string> usages;
  // With a TPM-resident key: its TPM2B_PUBLIC, the TPM2_Certify by the AK.
  std::optional<Bytes> tpm_public;
  Bytes certify_info;
  Bytes certify_signature;
};
std::string EncodeCsrRequest(const CsrRequest& r);

struct IssuedCertificate {
  std::string certificate_pem;
  std::string ca_pem;
  std::string serial;
  long long not_after = 0;
};
Outcome<IssuedCertificate> ParseIssuedCertificate(std::string_view body);

// True for a DNS name a node may have (RFC 1123 labels, lower or upper
// case, at most 253 characters).
bool ValidHostname(std::string_view name);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_PROTOCOL_H_
