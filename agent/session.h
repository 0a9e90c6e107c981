// --session-out / --session: one run's attestation carried to a later run of
// the same boot (the initramfs's attest,config run before Ignition fetches,
// and its csr run once /sysroot is mounted), so that the appliance sees one
// attestation. The file holds a bearer token: a credential, mode 0600, on a
// tmpfs only (docs/agent.md, "The initramfs: the kernel command line and a
// carried attestation"). Internal to rackgate-agent.
#ifndef RACKGATE_AGENT_SESSION_H_
#define RACKGATE_AGENT_SESSION_H_

#if !defined(RACKGATE_AGENT_INTERNAL)
#error "agent/session.h is internal to rackgate-agent"
#endif

#include <cstddef>
#include <ctime>
#include <string>
#include <string_view>

#include "agent/templates.h"
#include "agent/tpm.h"
#include "base/status.h"
#include "wire/protocol.h"

namespace rackgate::agent {

// A session file is a few KiB (two key blobs, a token); larger is not one.
inline constexpr size_t kMaxSessionBytes = 16 * 1024;
// A carried token with less life left than this is not used: the later
// run's steps must have time to finish with it.
inline constexpr std::time_t kMinSessionLifeSeconds = 60;

struct CarriedSession {
  wire::Token token;            // token, hostname, state; expires_in as received
  std::time_t expires_at = 0;   // wall clock: the token's expiry
  std::string machine;          // the EK identity prefix of the log lines
  EkKind ek = EkKind::kRsa2048; // the EK that attested
  bool config_fetched = false;  // the run fetched the attested config
  Bytes nonce;                  // the challenge's nonce (TPM2_Certify, renewal proofs)
  AkAlg ak_alg = AkAlg::kEcc;
  KeyBlobs ak;                  // the AK, wrapped by the EK (Tpm::LoadAk)
};

// The session as one JSON object (docs/agent.md has its fields).
std::string EncodeSession(const CarriedSession& s);
// kInvalidArgument "session_malformed" for anything EncodeSession would not
// write: not JSON, a missing or mistyped field, an unknown EK or AK
// algorithm, bad base64 or hex, a token DecodeToken refuses.
Result<CarriedSession> DecodeSession(std::string_view text);

// Ok when `s` has at least kMinSessionLifeSeconds left at `now`; else
// kInvalidArgument "session_expiring" saying how much it has.
Status CheckSessionLife(const CarriedSession& s, std::time_t now);

// Writes `s` to `path`: mode 0600, atomically (WriteFileAtomic).
// kIoError "file_unwritable".
Status WriteSession(const std::string& path, const CarriedSession& s);

// Reads the session at `path` and removes the file, whatever its content (a
// token is used by one run only and never left behind), then decodes it and
// checks its life at `now`. kNotFound "session_missing" when there is no
// file; "file_too_large", "file_unreadable", "session_malformed",
// "session_expiring" otherwise. The message never holds the token.
Result<CarriedSession> TakeSession(const std::string& path, std::time_t now);

}  // namespace rackgate::agent

#endif  // RACKGATE_AGENT_SESSION_H_
