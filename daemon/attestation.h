// The attestation protocol (docs/protocol.md): challenge and evidence
// handlers, bearer-token authentication for later endpoints, and the trust
// settings they use. Every decision logs one line naming the machine and
// the reason.
#ifndef RACKGATE_DAEMON_ATTESTATION_H_
#define RACKGATE_DAEMON_ATTESTATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "attest/ek_cert.h"
#include "attest/tpm.h"
#include "daemon/admission.h"
#include "daemon/http.h"
#include "storage/store.h"

namespace rackgate::daemon {

class Metrics;

// The EK trust anchors, swappable at run time (SIGHUP) while requests use
// the previous set. Thread-safe.
class TrustAnchors {
 public:
  explicit TrustAnchors(attest::EkTrustStore store)
      : store_(std::make_shared<const attest::EkTrustStore>(std::move(store))) {}
  std::shared_ptr<const attest::EkTrustStore> Get() const {
    std::lock_guard<std::mutex> l(mu_);
    return store_;
  }
  void Set(attest::EkTrustStore store) {
    auto next = std::make_shared<const attest::EkTrustStore>(std::move(store));
    std::lock_guard<std::mutex> l(mu_);
    store_ = std::move(next);
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const attest::EkTrustStore> store_;
};

struct AttestationOptions {
  int session_ttl_seconds = 120;
  int token_ttl_seconds = 900;
  int retry_after_seconds = 30;
  std::vector<attest::PcrSelection> default_pcr_selection;
  bool require_ek_certificate = true;
  bool discovery = false;
  std::string discovery_pool = "default";
  // Admission (daemon/admission.h): sessions open at once, overall and per
  // client address; over the bound, 503 with Retry-After of
  // busy_retry_after_seconds plus up to as much again of jitter.
  int max_open_sessions = 4096;
  int max_open_sessions_per_client = 256;
  int busy_retry_after_seconds = 2;
  // A challenge that waited longer than this for a handler thread is
  // refused as busy before any work: the appliance is behind, and new
  // machines are the load it can put off (0: off).
  int busy_queue_delay_ms = 50;
};

class AttestationService {
 public:
  using Clock = std::function<int64_t()>;  // unix seconds

  // BORROWED: store, anchors and metrics (may be null) outlive the service.
  AttestationService(storage::Store* store, const TrustAnchors* anchors, AttestationOptions options,
                     Metrics* metrics, Clock clock = nullptr);

  // POST /v1/attest/challenge and POST /v1/attest/evidence.
  Response Challenge(const Request& request);
  Response Evidence(const Request& request);
  // GET /v1/machine: the token's own machine.
  Response WhoAmI(const Request& request);

  // The machine a request's bearer token belongs to (with the token's
  // session nonce and AK), or the 401/403 response to send. For every
  // endpoint that takes the attestation token.
  std::variant<storage::Bearer, Response> Authenticate(const Request& request);

  // Verifies an EK certificate against the current anchors and the EK public
  // area when given; shared with enrollment. Fills the machine's EK facts.
  Result<attest::EkCertInfo> CheckEkCertificate(std::span<const uint8_t> cert,
                                               const std::vector<attest::Bytes>& intermediates,
                                               const attest::TpmPublic* ek_public) const;

  int64_t Now() const { return clock_(); }

 private:
  Response Refuse(int status, const std::string& reason, const std::string& message,
                  const std::string& who, bool waitable = false);
  Response Busy(const std::string& reason, const std::string& who);
  void Count(const std::string& verdict, const std::string& reason);

  storage::Store* store_;
  const TrustAnchors* anchors_;
  AttestationOptions options_;
  Metrics* metrics_;
  Clock clock_;
  SessionGate gate_;

  // EK certificate verdicts by (certificate, intermediates), for the trust
  // store they were reached with: a rack that attests again after a reboot
  // does not rebuild the same chain. A new trust store (SIGHUP) starts over,
  // and validity is checked against the clock on every use.
  struct EkVerdict {
    std::shared_ptr<const attest::EkTrustStore> anchors;
    attest::EkCertInfo info;
  };
  mutable std::mutex ek_cache_mu_;
  mutable std::unordered_map<std::string, EkVerdict> ek_cache_;  // guarded by ek_cache_mu_
};

}  // namespace rackgate::daemon

#endif  // RACKGATE_DAEMON_ATTESTATION_H_
