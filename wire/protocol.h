// The attestation protocol's JSON bodies (docs/protocol.md) as typed values:
// strict parsing of what machines send, and rendering of what they get back.
// Unknown fields, wrong types and oversized values are refused.
#ifndef RACKGATE_WIRE_PROTOCOL_H_
#define RACKGATE_WIRE_PROTOCOL_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "attest/tpm.h"

namespace rackgate::wire {

using attest::Bytes;

// Bounds on decoded fields.
inline constexpr size_t kMaxTpm2bPublic = 1024;
inline constexpr size_t kMaxCertificate = 16 * 1024;
inline constexpr size_t kMaxIntermediates = 4;
inline constexpr size_t kMaxAttest = 2048;
inline constexpr size_t kMaxSignature = 1024;
inline constexpr size_t kMaxSecret = 64;
inline constexpr size_t kMaxSessionId = 64;
inline constexpr size_t kMaxEventLog = 16 << 20;

struct ChallengeRequest {
  Bytes ek_public;
  std::optional<Bytes> ek_certificate;
  std::vector<Bytes> ek_intermediates;
  Bytes ak_public;
};

struct EvidenceRequest {
  std::string session;
  Bytes secret;
  Bytes quote;
  Bytes signature;
  attest::PcrValues pcrs;
  std::optional<Bytes> event_log;
};

// kInvalidArgument with reason bad_json, field_missing or field_invalid,
// naming the field.
Result<ChallengeRequest> ParseChallengeRequest(std::string_view body);
Result<EvidenceRequest> ParseEvidenceRequest(std::string_view body);


}  // namespace rackgate::wire

#endif  // RACKGATE_WIRE_PROTOCOL_H_
