// Admission control for attestations (docs/performance.md, "Admission"): a
// bound on sessions open at once (challenged, evidence not yet in), overall
// and per client address. A challenge over the bound is refused before any
// database lookup or cryptography, with 503 and a jittered Retry-After, so a
// booting rack is told when to come back instead of piling up work the
// appliance cannot finish within the session's lifetime.
#ifndef RACKGATE_CORE_ADMISSION_H_
#define RACKGATE_CORE_ADMISSION_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "attest/quote.h"

namespace rackgate::core {

// The AK of a session as its challenge built it, kept for the session's
// evidence so that the key is built once per session, not twice. Valid only
// for a session whose stored AK is byte for byte `ak_public`: the user
// compares them before using `key`.
struct SessionAk {
  std::vector<uint8_t> ak_public;  // the TPM2B_PUBLIC `key` was built from
  attest::VerifyKey key;
  // The anchor relaxations the challenge's EK certificate needed
  // (attest::EkCertInfo::relaxations_used), for the attestation record.
  std::vector<std::string> ek_relaxations;
};

class SessionGate {
 public:
  // max_total, max_per_client >= 1.
  SessionGate(int max_total, int max_per_client) : max_total_(max_total), max_per_client_(max_per_client) {}

  enum class Verdict { kAdmitted, kFull, kClientFull };

  // Reserves a place for a challenge from `client` (an address, no port)
  // until `expires_at`; places of sessions past their expiry are reclaimed
  // first. On kAdmitted the caller must Bind or Release `ticket`.
  Verdict Admit(const std::string& client, int64_t now, int64_t expires_at, uint64_t* ticket);
  // The reservation becomes the session `session_id` (same expiry), keeping
  // `ak` (may be null) until the session finishes or expires: the gate's
  // bounds bound the keys kept too.
  void Bind(uint64_t ticket, const std::string& session_id, std::shared_ptr<const SessionAk> ak = nullptr);
  // A challenge that failed after Admit.
  void Release(uint64_t ticket);
  // The session's evidence arrived (whatever its verdict); unknown ids are
  // ignored (expired and reclaimed, or issued before a restart). Returns the
  // AK that Bind kept for the session, or null (unknown id, none kept).
  std::shared_ptr<const SessionAk> Finish(const std::string& session_id);

  int open() const;

 private:
  struct Place {
    std::string client;
    int64_t expires_at = 0;
    std::shared_ptr<const SessionAk> ak;
  };
  void Drop(std::unordered_map<uint64_t, Place>::iterator it);  // REQUIRES: mu_
  void ReclaimExpired(int64_t now);                              // REQUIRES: mu_

  const int max_total_;
  const int max_per_client_;
  mutable std::mutex mu_;
  uint64_t next_ticket_ = 1;                            // guarded by mu_
  std::unordered_map<uint64_t, Place> places_;          // guarded by mu_
  std::unordered_map<std::string, uint64_t> by_session_;  // guarded by mu_
  std::unordered_map<std::string, int> per_client_;     // guarded by mu_
};

// The client part of "ADDRESS:PORT" or "[V6]:PORT".
std::string ClientAddress(const std::string& peer);

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ADMISSION_H_
