// The attestation protocol's decisions (docs/protocol.md): challenge,
// evidence and its verdict, bearer-token authentication for later endpoints,
// and the trust settings they use. Every decision logs one line naming the
// machine and the reason.
#ifndef RACKGATE_CORE_ATTESTATION_H_
#define RACKGATE_CORE_ATTESTATION_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "attest/ek_cert.h"
#include "attest/tpm.h"
#include "core/admission.h"
#include "core/anonymous_refusals.h"
#include "core/policy_cache.h"
#include "core/pool_settings.h"
#include "core/unknown_eks.h"
#include "base/metrics.h"
#include "storage/roles.h"
#include "wire/protocol.h"

namespace rackgate::core {


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
  std::vector<attest::PcrSelection> default_pcr_selection;
  bool require_ek_certificate = true;
  bool discovery = false;
  std::string discovery_pool = "default";
  // Admission (core/admission.h): sessions open at once, overall and per
  // client address; over the bound, busy or busy_client.
  int max_open_sessions = 4096;
  int max_open_sessions_per_client = 256;
  // A challenge that waited longer than this for a handler thread is
  // refused as busy before any work: the appliance is behind, and new
  // machines are the load it can put off (0: off).
  int busy_queue_delay_ms = 50;
};

// The transport's facts about a caller: where it came from and how long its
// request waited before a handler took it (in its socket for a thread, and in
// the handler pool's queue when there is one: daemon/http.h). Never a
// decision.
struct Caller {
  std::string address;  // "127.0.0.1:4711"
  std::chrono::microseconds queued{0};
};

// A challenge's answer (docs/protocol.md, step 2): the wire module's type,
// so the answer has one definition for the appliance and the agent.
using ChallengeResult = wire::Challenge;

// The counters a verified quote carried: they only go forward.
struct TpmCounters {
  uint32_t reset_count = 0;
  uint32_t restart_count = 0;
  uint64_t clock = 0;
  uint64_t firmware_version = 0;
};

// What the evidence of one session proved, as a value: whose machine, the
// outcome, the reason (the first refusal) and every policy violation, the
// TPM's counters and PCRs when the quote verified.
struct Verdict {
  enum class Outcome { kAttested, kRefused };
  int64_t machine_id = 0;
  std::string hostname;
  Outcome outcome = Outcome::kRefused;
  // Ok when attested; else the refusal, whose reason() is the protocol's
  // reason code (docs/protocol.md) and whose message goes to the client.
  Status refusal;
  // Every broken policy rule, in rule order (boot_policy_violation).
  std::vector<attest::Violation> violations;
  // The sender proved it holds the machine's TPM (the credential was
  // activated). A refusal before that is anonymous (docs/trust.md): anyone
  // who knows the EK could have caused it, so it is not the machine's.
  bool possession_proven = false;
  // Set once the quote verified, with what it vouched for.
  bool quote_verified = false;
  TpmCounters counters;
  attest::PcrValues pcrs;
  // The TOFU values to pin (first use), when the policy has TOFU PCRs.
  std::optional<attest::PcrValues> tofu_to_record;

  bool attested() const { return outcome == Outcome::kAttested; }
};

// A successful evidence answer: the bearer token and where the machine is.
struct EvidenceResult {
  Verdict verdict;
  std::string token;
  int expires_in = 0;
  std::string hostname;
  std::string state;
  // The appliance CA bundle the machine should trust from now on
  // (core/appliance_ca.h; "" when the service has none set).
  std::string ca_bundle;
};

// GET /v1/machine: the token's own machine and what its pool asks of it.
using MachineView = wire::MachineRecord;

// What Verify judges besides the request: the consumed session, its machine,
// the counters of its last good attestation (nullptr: none) and the policy
// that applies (nullptr: none) with the recorded TOFU values (nullptr: none).
// BORROWED: everything outlives the call.
struct EvidenceContext {
  const storage::Session* session = nullptr;
  const storage::Machine* machine = nullptr;
  const storage::AttestationRecord* last = nullptr;
  const attest::BootPolicy* policy = nullptr;
  const attest::PcrValues* tofu_recorded = nullptr;
  // The stored policy text does not parse: the verdict is policy_invalid
  // once everything before the policy step passed.
  bool policy_unusable = false;
  // The AK as this appliance's challenge built it (SessionGate), or null
  // (a restart since, another appliance's challenge): Verify uses it only
  // when its bytes are the session's AK, else builds the key again.
  const SessionAk* challenged_ak = nullptr;
};

// The PCRs an observing pool asks every machine to quote, beside its
// policy's (docs/policy.md, "Observe"): what the firmware's event log
// covers and a proposal may judge (0-7: firmware, Secure Boot, boot
// applications; 8, 9: grub and the Linux EFI stub; 11: a UKI; 12: systemd's
// command lines; 14: shim's MOK lists). PCR 10 (IMA) is left out: the
// firmware log never holds it.
inline constexpr uint32_t kObservedPcrs[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 14};

// A store failure, as every core service answers it: reason "busy" (the
// machine may try again; the cause stays in the appliance's log), or
// "db_unavailable" when the cause was that the database did not answer
// (a PostgreSQL failover), so that it is told apart from load.
Status StoreBusy(const Status& cause);

// The protocol's decisions for challenge, evidence and bearer tokens. No
// HTTP: typed requests in, typed results or a Status out, whose reason() is
// the protocol's reason code; the daemon maps it to a status code
// (daemon/status_http.h). Store failures come back as reason "busy".
// Thread-safe.
class ApplianceCaBundle;

class AttestationService {
 public:
  using Clock = std::function<int64_t()>;  // unix seconds

  // BORROWED: store, anchors and metrics (may be null) outlive the service.
  AttestationService(storage::AttestationStore* store, const TrustAnchors* anchors, AttestationOptions options,
                     Metrics* metrics, Clock clock = nullptr);

  // POST /v1/attest/challenge as its handler calls it, one entry: load
  // shedding first (busy when the request waited longer than
  // busy_queue_delay_ms for a handler thread: a new machine is put off
  // before what it sent is even read), then `decode()` (wire's reading of
  // the body; its refusal is the answer), then Challenge below.
  Result<ChallengeResult> Challenge(const std::function<Result<wire::ChallengeRequest>()>& decode,
                                    const Caller& caller);

  // POST /v1/attest/challenge: admission, the enrollment by EK, the EK
  // certificate, the AK's attributes, the policy's PCR selection, then a
  // session and its credential.
  Result<ChallengeResult> Challenge(const wire::ChallengeRequest& request, const Caller& caller);

  // POST /v1/attest/evidence: the session is consumed, its machine and last
  // good counters and policy are read, Verify judges, and one store write
  // records the outcome (and on success issues the token).
  Result<EvidenceResult> Evidence(const wire::EvidenceRequest& request, const Caller& caller);
  // The CA bundle a successful evidence answer carries (docs/operations.md,
  // "Rotating the appliance CA"). BORROWED: outlives the service; set
  // before serving.
  void SetCaBundle(ApplianceCaBundle* ca) { ca_bundle_ = ca; }

  // The verdict on evidence, in order: activation proof (possession_proven),
  // machine state, quote, counters, event log, boot policy. Pure: no store, no clock.
  static Verdict Verify(const wire::EvidenceRequest& request, const EvidenceContext& context);

  // The machine a bearer token belongs to (with the token's session nonce
  // and AK): token_missing, token_unknown, token_expired, token_revoked or
  // busy otherwise. For every endpoint that takes the attestation token.
  Result<storage::Bearer> Authenticate(const std::optional<std::string>& bearer_token);

  // GET /v1/machine.
  Result<MachineView> WhoAmI(const std::optional<std::string>& bearer_token);

  // Verifies an EK certificate against the current anchors and the EK public
  // area when given; shared with enrollment. Fills the machine's EK facts.
  Result<attest::EkCertInfo> CheckEkCertificate(std::span<const uint8_t> cert,
                                               const std::vector<attest::Bytes>& intermediates,
                                               const attest::TpmPublic* ek_public) const;

  int64_t Now() const { return clock_(); }
  // Whether a machine with no EK certificate presented or on record is
  // refused (ek_cert_missing).
  bool require_ek_certificate() const { return options_.require_ek_certificate; }

  // Observability (docs/observability.md): the EKs whose challenge was
  // refused because no machine has them, recently (bounded, in memory).
  const UnknownEkTable& unknown_eks() const { return unknown_eks_; }
  // Evidence refused before its sender proved possession of the TPM, per
  // machine (docs/trust.md; bounded, in memory).
  const AnonymousRefusalTable& anonymous_refusals() const { return anonymous_; }
  // Writes the anonymous-refusal summaries that are due (one audit row,
  // action anonymous_refusals, per machine per interval); rackgated calls it
  // from its once-a-minute sweep. Returns how many were written; a store
  // failure is logged and that summary dropped (the metric has the counts).
  int FlushAnonymousRefusals();

  // The one gate of everything an attestation token releases (docs/trust.md,
  // "One gate"): the attested config and every CSR (first, renewal, client,
  // serving). The token's machine, read with its pool, must be trusted now
  // (CheckTrust): machine_untrusted (403) otherwise; token_* when the token
  // is not good; busy when the store fails; settings_invalid when the pool's
  // settings do not parse.
  struct Release {
    storage::Bearer bearer;
    storage::Pool pool;
    PoolSettings settings;
  };
  Result<Release> AuthorizeRelease(const std::optional<std::string>& bearer_token);
  // The same for a token already authenticated (a caller that needs the
  // machine before the gate, to count or audit the refusal).
  Result<Release> AuthorizeRelease(storage::Bearer bearer);

 private:
  // Challenge's load shedding (above).
  Status ShedLoad(const Caller& caller);
  Status Refuse(Status refusal, const std::string& who, bool waitable = false);
  // A refusal before proof of possession: counted, tallied and summarised
  // (anonymous_), never recorded as the machine's attestation.
  Status RefuseAnonymous(const Status& refusal, const storage::Machine& machine, const Caller& caller);
  void WriteAnonymousSummary(const AnonymousSummary& summary);
  Status Busy(const std::string& reason, const std::string& who);
  void Count(const std::string& verdict, const std::string& reason);
  // The boot policy that applies to a machine (its own, else its pool's)
  // and whether its pool observes (docs/policy.md, "Observe").
  struct PolicyInForce {
    std::shared_ptr<const attest::BootPolicy> policy;  // null: no policy
    Status unusable;  // not ok: the policy text does not parse (policy_invalid)
    bool observe = false;
  };
  // The machine's policy (its own, else its pool's) and its pool's mode.
  // The pool comes with the machine's read (ReadChallenge, ReadEvidence):
  // a pool that cannot be read fails that read, which is answered as a
  // store failure (StoreBusy), never "no policy" and never "enforce".
  PolicyInForce PolicyFor(const storage::Machine& m, const storage::Pool& pool);
  // Observe mode's step after an identity-verified attestation: keeps the
  // machine's boot (log, quoted PCRs, verdict of the policy in force) and
  // says so in the log and the metrics. Ok when the machine may go on (a
  // policy is in force and passes); boot_policy_observing (not yet counted
  // as a refusal: the caller answers it) when it waits; StoreBusy when the
  // boot could not be kept.
  Status Observe(const storage::Machine& machine, const wire::EvidenceRequest& req, const Verdict& verdict,
                 bool has_policy, const std::string& who);
  // Challenge's steps: the answer to an EK no enrollment holds (waits;
  // discovery records a genuine TPM as pending), and the new session.
  Status EvidenceUnreadable(const Status& read, const std::string& who);
  // Evidence's last step for an attested machine: one store write, a token.
  Result<EvidenceResult> RecordSuccess(Verdict verdict, storage::AttestationRecord record,
                                       const storage::Session& session, const storage::Machine& machine,
                                       int64_t arrived, std::chrono::steady_clock::time_point started,
                                       const std::string& who);
  // The anchor relaxations the session's EK certificate needed: the
  // challenge's note when this appliance answered it, else those of the
  // machine's certificate on record.
  std::vector<std::string> EkRelaxationsOf(const SessionAk* challenged, const storage::Machine& machine) const;
  Status UnknownEk(const wire::ChallengeRequest& req, const attest::TpmPublic& ek, const attest::Bytes& ek_hash,
                   const Caller& caller, const std::string& who);
  Result<ChallengeResult> OpenSession(const wire::ChallengeRequest& req, const attest::TpmPublic& ek,
                                      const attest::TpmPublic& ak, const storage::Machine& machine,
                                      const std::vector<attest::PcrSelection>& selection, const std::string& who);

  storage::AttestationStore* store_;
  const TrustAnchors* anchors_;
  AttestationOptions options_;
  Metrics* metrics_;
  Clock clock_;
  ApplianceCaBundle* ca_bundle_ = nullptr;
  SessionGate gate_;
  UnknownEkTable unknown_eks_;
  AnonymousRefusalTable anonymous_;
  PolicyCache policies_;

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

}  // namespace rackgate::core

#endif  // RACKGATE_CORE_ATTESTATION_H_
