// An in-memory storage::Store for tests: no database, the same contract
// (store.h, storage/roles.h) for the roles it implements, so that the core's
// tests of attestation and CSRs run on it as on SQLite and PostgreSQL
// (docs/storage.md, "The fake").
//
// Implemented with the contract's reasons, one-use sessions, expiry,
// atomicity (one mutex; every check is made before anything changes) and
// audit rows: PoolReader, MachineReader, DecisionAudit, AttestationStore,
// CsrStore, KubeApprovalStore; of the other roles what those tests set up
// and look at: PutPool (with its first token and templates), SetPoolTemplate,
// EnrollMerged, Import, Approve (with changes too), Revoke, Reset,
// DeleteMachine, RenameMachine, the provisioning reports, Transition,
// ListAudit, AuditAdminRefusal, RecordConfigServed, PurgeExpired, the
// counts and the CA rotation record. Everything else answers kUnsupported
// (fake_unsupported). Audit rows carry no hash chain (hash and prev_hash are
// empty): the chain is the SQL backends' (docs/audit.md).
//
// Thread-safe. For tests only: it lives in libstorage_testing.
#ifndef RACKGATE_STORAGE_TESTING_FAKE_STORE_H_
#define RACKGATE_STORAGE_TESTING_FAKE_STORE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "storage/store.h"

namespace rackgate::storage::testing {

class FakeStore final : public Store {
 public:
  explicit FakeStore(const StoreOptions& options = {});
  ~FakeStore() override;

  // PoolReader
  Result<Pool> GetPool(const std::string& name) override;
  Result<std::vector<Pool>> ListPools() override;
  Result<std::vector<PoolToken>> ValidPoolTokens(const std::string& pool, int64_t now) override;
  Result<std::pair<Pool, std::vector<PoolToken>>> GetPoolWithTokens(const std::string& name, int64_t now) override;
  // MachineReader
  Result<Machine> FindMachineByEkHash(const Bytes& ek_hash) override;
  Result<Machine> GetMachine(const std::string& hostname) override;
  Result<Machine> GetMachineById(int64_t id) override;
  Result<std::vector<Machine>> ListMachines(const MachineFilter& filter) override;
  // DecisionAudit
  Status AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                           const Actor& actor, int64_t now) override;
  // AttestationStore
  Result<Machine> Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) override;
  Status CreateSession(const Session& session) override;
  Result<Session> ConsumeSession(const std::string& id, int64_t now) override;
  Result<Bearer> LookupToken(const Bytes& token_hash, int64_t now) override;
  Result<ChallengeInputs> ReadChallenge(const Bytes& ek_hash) override;
  Result<EvidenceInputs> ReadEvidence(const std::string& session_id, int64_t now) override;
  Result<Machine> ConsumeSessionAndRecordSuccess(const AttestationRecord& record, const Token& token,
                                                 const std::optional<std::string>& tofu_pcrs_json,
                                                 int64_t now) override;
  Status ConsumeSessionAndRecordFailure(const AttestationRecord& record, int64_t now) override;
  Result<Machine> RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                           const std::optional<std::string>& tofu_pcrs_json) override;
  Status RecordAttestationFailure(const AttestationRecord& record) override;
  Result<AttestationRecord> LastSuccessfulAttestation(int64_t machine_id) override;
  Result<std::vector<AttestationRecord>> RecentFailures(int limit) override;
  Status RecordBootObservation(const BootObservation& observation) override;
  // CsrStore
  Result<Machine> RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) override;
  Result<IssuedCertificate> FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) override;
  Result<IssuedCertificate> GetCertificate(const std::string& serial) override;
  Result<std::vector<IssuedCertificate>> ListCertificates(const std::string& hostname, int limit) override;
  Result<Machine> RecordRenewal(const IssuedCertificate& cert, const std::string& replaces, const Actor& actor,
                                int64_t now) override;
  Status ConsumeCertifyNonce(const Bytes& token_hash, int64_t now) override;
  Result<Machine> RecordIssuedCertificate(const IssuedCertificateRecord& record, const Actor& actor,
                                          int64_t now) override;
  Result<CsrApprovalRequest> QueueCsrRequest(const CsrApprovalRequest& r, const CsrQueueLimits& limits,
                                             const Actor& actor, int64_t now) override;
  Result<CsrApprovalRequest> DecideCsrRequest(int64_t id, bool approve, const std::string& deny_reason,
                                              const Actor& actor, int64_t now) override;
  Result<std::vector<CsrApprovalRequest>> ListCsrRequests(bool all, int limit) override;
  // KubeApprovalStore
  Result<AttestedKey> RegisterAttestedKey(const AttestedKey& key, const std::optional<Bytes>& certify_token_hash,
                                          const Actor& actor, int64_t now) override;
  Result<AttestedKey> FindAttestedKey(int64_t machine_id, const std::string& kind,
                                      const Bytes& public_key_sha256) override;
  Result<KubeCsrDecision> GetKubeCsr(const std::string& uid) override;
  Result<KubeCsrDecision> RecordKubeCsr(const KubeCsrDecision& d, const Actor& actor, int64_t now) override;
  Result<KubeCsrDecision> DecideKubeCsr(const std::string& uid, bool approve, const std::string& reason,
                                        const Actor& actor, int64_t now) override;
  Result<std::vector<KubeCsrDecision>> ListKubeCsrs(bool waiting_only, int limit) override;
  // IgnitionStore
  Result<Machine> RecordConfigServed(int64_t machine_id, const std::string& digest, const std::string& version,
                                     const Actor& actor, int64_t now) override;
  Status RecordReport(const ProvisioningReportRecord& report) override;
  Result<ProvisioningReportRecord> LastReport(int64_t machine_id) override;
  Result<std::map<int64_t, ProvisioningReportRecord>> ListLastReports() override;
  // PolicyStore
  Result<Pool> SetPoolBootPolicy(const PoolPolicyChange& change, const Actor& actor, int64_t now) override;
  Result<std::vector<BootObservation>> ListBootObservations(const std::string& pool) override;
  // TrustStore
  Result<std::vector<Machine>> MarkStaleUntrusted(int64_t now, const std::map<std::string, int64_t>& max_age_by_pool,
                                                  int batch) override;
  Result<int64_t> CountUntrusted() override;
  // InventoryStore
  Result<Pool> PutPool(const Pool& pool, const Actor& actor, int64_t now, const std::optional<Bytes>& first_token_hash,
                       const std::vector<PoolTemplateChange>& templates, PoolPutOutcome* outcome) override;
  Result<Pool> SetPoolTemplate(const std::string& pool, std::string_view which,
                               const std::optional<std::string>& template_json, const std::string& digest,
                               const Actor& actor, int64_t now) override;
  Status RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                         const Actor& actor, int64_t now) override;
  Result<EnrollOutcome> EnrollMerged(const Enrollment& e, const EnrollMerge& merge, const Actor& actor,
                                     bool replace_ek, int64_t now) override;
  Result<ImportReport> Import(const std::vector<ImportRow>& rows, const EnrollMerge& merge,
                              const ImportOptions& options, const Actor& actor, int64_t now,
                              const ImportProgress& progress) override;
  Result<Machine> Approve(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                          int64_t now) override;
  Result<Machine> Revoke(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> Reset(const std::string& hostname, const Actor& actor, int64_t now, bool unrevoke) override;
  Result<Machine> Transition(int64_t machine_id, const std::vector<MachineState>& from, MachineState to,
                             const Actor& actor, const std::string& action, int64_t now) override;
  Result<Machine> DeleteMachine(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> RenameMachine(const std::string& hostname, const std::string& new_hostname, const Actor& actor,
                                int64_t now) override;
  // EventStore
  Result<int64_t> SyncWebhooks(const std::vector<WebhookTarget>& hooks, int64_t now) override;
  Result<std::vector<DueDelivery>> DueDeliveries(int64_t now, int limit) override;
  Result<std::vector<DueDelivery>> ClaimDueDeliveries(int64_t now, int limit, int64_t lease_seconds) override;
  Status RecordDeliveryAttempt(int64_t event_id, const std::string& webhook, bool delivered, int64_t next_attempt_at,
                               const std::string& error, int64_t now) override;
  Result<std::vector<Event>> ListEvents(const EventFilter& filter) override;
  Result<int64_t> CountPendingDeliveries() override;
  Result<int64_t> PurgeEvents(int64_t older_than, int64_t keep_at_most) override;
  // AuditStore
  Status AuditApplianceEvent(const std::string& action, const std::string& detail_json, const Actor& actor,
                             int64_t now) override;
  Status AuditAdminRefusal(const std::string& hostname, const std::string& detail_json, const Actor& actor,
                           int64_t now) override;
  Result<std::vector<AuditEntry>> ListAudit(const AuditFilter& filter) override;
  Result<AuditChainReport> VerifyAuditChain(const std::optional<AuditAnchor>& anchor) override;
  // CaRotationStore
  Result<std::optional<CaRotation>> GetCaRotation(const std::string& kind) override;
  Result<CaRotation> PrepareCaRotation(const CaRotation& rotation, const std::string& detail_json, const Actor& actor,
                                       int64_t now) override;
  Result<CaRotation> SwitchCaRotation(const std::string& kind, const std::string& next_sha256,
                                      const std::string& detail_json, const Actor& actor, int64_t now) override;
  Status RetireCaRotation(const std::string& kind, const std::string& next_sha256, const std::string& detail_json,
                          const Actor& actor, int64_t now) override;
  // MaintenanceStore
  Result<PurgeCounts> PurgeExpired(int64_t now, int batch) override;
  Result<std::map<std::string, int64_t>> CountByState() override;
  Result<int64_t> CountOpenSessions(int64_t now) override;
  WriteStats GetWriteStats() const override;
  Status Backup(const std::string& dest_path) override;

 private:
  // EnrollMerged's work under mu_; throws StoreError.
  EnrollOutcome EnrollMergedIn(const Enrollment& given, const EnrollMerge& merge, size_t row, const Actor& actor,
                               bool replace_ek, int64_t now);

  struct State;
  // The CSR role's writes with mu_ already held (RecordIssuedCertificate
  // runs them in one critical section).
  Result<Machine> RecordCertificateLocked(const IssuedCertificate& cert, const Actor& actor, int64_t now);
  Result<Machine> RecordRenewalLocked(const IssuedCertificate& cert, const std::string& replaces, const Actor& actor,
                                      int64_t now);
  Status ConsumeCertifyNonceLocked(const Bytes& token_hash, int64_t now);
  // The approver mode's helpers, with mu_ held: the key registered in the
  // machine's current epoch (null when none; owned by state_), and an
  // approved join's checks and effects (throws StoreError, changing nothing).
  AttestedKey* CurrentKeyLocked(int64_t machine_id, const std::string& kind, const Bytes& key_hash);
  void ApplyApprovedJoinLocked(Machine& m, const KubeCsrDecision& d, int64_t now);

  std::unique_ptr<State> state_;  // owned; every access under mu_
  mutable std::mutex mu_;
};

}  // namespace rackgate::storage::testing

#endif  // RACKGATE_STORAGE_TESTING_FAKE_STORE_H_
