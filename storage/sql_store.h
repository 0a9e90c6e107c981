// storage::Store over the SQL seam (storage/sql.h): the store's logic,
// written once for every SQL backend. Each group of methods is defined in the
// file its comment names; the contract is store.h's. A backend derives from
// SqlStore and adds how it opens, migrates and backs up its database:
// SqliteStore (sqlite_store.cc) and PostgresStore (postgres_store.cc).
#ifndef RACKGATE_STORAGE_SQL_STORE_H_
#define RACKGATE_STORAGE_SQL_STORE_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/sql_store.h is internal to storage/; include storage/store.h"
#endif

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/database.h"
#include "storage/store.h"

namespace rackgate::storage {

class SqlStore : public Store {
 public:
  // pools.cc
  Result<Pool> PutPool(const Pool& pool, const Actor& actor, int64_t now, const std::optional<Bytes>& first_token_hash,
                       const std::vector<PoolTemplateChange>& templates, PoolPutOutcome* outcome) override;
  Result<Pool> GetPool(const std::string& name) override;
  Result<std::vector<Pool>> ListPools() override;
  Result<Pool> SetPoolTemplate(const std::string& pool, std::string_view which,
                               const std::optional<std::string>& template_json, const std::string& digest,
                               const Actor& actor, int64_t now) override;
  Status RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                         const Actor& actor, int64_t now) override;
  Result<std::vector<PoolToken>> ValidPoolTokens(const std::string& pool, int64_t now) override;
  Result<std::pair<Pool, std::vector<PoolToken>>> GetPoolWithTokens(const std::string& name, int64_t now) override;

  // enrollment.cc
  Result<Machine> Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) override;
  Result<EnrollOutcome> EnrollMerged(const Enrollment& e, const EnrollMerge& merge, const Actor& actor,
                                     bool replace_ek, int64_t now) override;
  Result<ImportReport> Import(const std::vector<ImportRow>& rows, const EnrollMerge& merge,
                              const ImportOptions& options, const Actor& actor, int64_t now,
                              const ImportProgress& progress) override;

  // machines.cc
  Result<Machine> FindMachineByEkHash(const Bytes& ek_hash) override;
  Result<Machine> GetMachine(const std::string& hostname) override;
  Result<Machine> GetMachineById(int64_t id) override;
  Result<std::vector<Machine>> ListMachines(const MachineFilter& filter) override;
  Result<Machine> Approve(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> Revoke(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> Reset(const std::string& hostname, const Actor& actor, int64_t now, bool unrevoke) override;
  Result<Machine> Transition(int64_t machine_id, const std::vector<MachineState>& from, MachineState to,
                             const Actor& actor, const std::string& action, int64_t now) override;
  Result<std::map<std::string, int64_t>> CountByState() override;

  // sessions.cc
  Status CreateSession(const Session& session) override;
  Result<Session> ConsumeSession(const std::string& id, int64_t now) override;
  Result<Bearer> LookupToken(const Bytes& token_hash, int64_t now) override;
  Result<PurgeCounts> PurgeExpired(int64_t now, int batch) override;
  Result<int64_t> CountOpenSessions(int64_t now) override;

  // attestations.cc
  Result<Machine> RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                           const std::optional<std::string>& tofu_pcrs_json) override;
  Status RecordAttestationFailure(const AttestationRecord& record) override;
  Result<AttestationRecord> LastSuccessfulAttestation(int64_t machine_id) override;
  Result<std::vector<AttestationRecord>> RecentFailures(int limit) override;
  // evidence in one read and one write
  Result<ChallengeInputs> ReadChallenge(const Bytes& ek_hash) override;
  Result<EvidenceInputs> ReadEvidence(const std::string& session_id, int64_t now) override;
  Result<Machine> ConsumeSessionAndRecordSuccess(const AttestationRecord& record, const Token& token,
                                                 const std::optional<std::string>& tofu_pcrs_json,
                                                 int64_t now) override;
  Status ConsumeSessionAndRecordFailure(const AttestationRecord& record, int64_t now) override;

  // certificates.cc
  Result<Machine> RecordConfigServed(int64_t machine_id, const std::string& digest, const std::string& version,
                                     const Actor& actor, int64_t now) override;
  Result<Machine> RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) override;
  Result<IssuedCertificate> FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) override;
  Result<std::vector<IssuedCertificate>> ListCertificates(const std::string& hostname, int limit) override;

  // csr_requests.cc and enrollment.cc (manual CSR approval, discovery)
  Result<CsrApprovalRequest> QueueCsrRequest(const CsrApprovalRequest& r, const CsrQueueLimits& limits,
                                             const Actor& actor, int64_t now) override;
  Result<CsrApprovalRequest> DecideCsrRequest(int64_t id, bool approve, const std::string& deny_reason,
                                              const Actor& actor, int64_t now) override;
  Result<std::vector<CsrApprovalRequest>> ListCsrRequests(bool all, int limit) override;
  Result<Machine> Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                          int64_t now) override;
  // renew: certificates.cc, sessions.cc
  Result<IssuedCertificate> GetCertificate(const std::string& serial) override;
  Result<Machine> RecordRenewal(const IssuedCertificate& cert, const std::string& replaces, const Actor& actor,
                                int64_t now) override;
  Status ConsumeCertifyNonce(const Bytes& token_hash, int64_t now) override;
  // CSR role, issue 28: certificates.cc
  Result<Machine> RecordIssuedCertificate(const IssuedCertificateRecord& record, const Actor& actor,
                                          int64_t now) override;

  // kube_approvals.cc (approver mode)
  Result<AttestedKey> RegisterAttestedKey(const AttestedKey& key, const std::optional<Bytes>& certify_token_hash,
                                          const Actor& actor, int64_t now) override;
  Result<AttestedKey> FindAttestedKey(int64_t machine_id, const std::string& kind,
                                      const Bytes& public_key_sha256) override;
  Result<KubeCsrDecision> GetKubeCsr(const std::string& uid) override;
  Result<KubeCsrDecision> RecordKubeCsr(const KubeCsrDecision& d, const Actor& actor, int64_t now) override;
  Result<KubeCsrDecision> DecideKubeCsr(const std::string& uid, bool approve, const std::string& reason,
                                        const Actor& actor, int64_t now) override;
  Result<std::vector<KubeCsrDecision>> ListKubeCsrs(bool waiting_only, int limit) override;

  // audit.cc
  // Observability (docs/observability.md).
  Status AuditApplianceEvent(const std::string& action, const std::string& detail_json, const Actor& actor,
                             int64_t now) override;
  Status AuditAdminRefusal(const std::string& hostname, const std::string& detail_json, const Actor& actor,
                           int64_t now) override;
  Status AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                           const Actor& actor, int64_t now) override;
  Result<std::vector<AuditEntry>> ListAudit(const AuditFilter& filter) override;
  // Delete, rename (machines.cc) and the audit chain (audit.cc).
  Result<Machine> DeleteMachine(const std::string& hostname, const Actor& actor, int64_t now) override;
  Result<Machine> RenameMachine(const std::string& hostname, const std::string& new_hostname, const Actor& actor,
                                int64_t now) override;
  Result<AuditChainReport> VerifyAuditChain(const std::optional<AuditAnchor>& anchor) override;

  // events.cc
  Result<int64_t> SyncWebhooks(const std::vector<WebhookTarget>& hooks, int64_t now) override;
  Result<std::vector<DueDelivery>> DueDeliveries(int64_t now, int limit) override;
  // fleet: delivery claims (docs/ha.md).
  Result<std::vector<DueDelivery>> ClaimDueDeliveries(int64_t now, int limit, int64_t lease_seconds) override;
  Status RecordDeliveryAttempt(int64_t event_id, const std::string& webhook, bool delivered,
                               int64_t next_attempt_at, const std::string& error, int64_t now) override;
  Result<std::vector<Event>> ListEvents(const EventFilter& filter) override;
  Result<int64_t> CountPendingDeliveries() override;
  Result<int64_t> PurgeEvents(int64_t older_than, int64_t keep_at_most) override;
  // machines.cc (trust sweep) and reports.cc
  Result<std::vector<Machine>> MarkStaleUntrusted(int64_t now, const std::map<std::string, int64_t>& max_age_by_pool,
                                                  int batch) override;
  Result<int64_t> CountUntrusted() override;
  Status RecordReport(const ProvisioningReportRecord& report) override;
  Result<ProvisioningReportRecord> LastReport(int64_t machine_id) override;
  Result<std::map<int64_t, ProvisioningReportRecord>> ListLastReports() override;
  Result<Pool> SetPoolBootPolicy(const PoolPolicyChange& change, const Actor& actor, int64_t now) override;
  Status RecordBootObservation(const BootObservation& observation) override;
  Result<std::vector<BootObservation>> ListBootObservations(const std::string& pool) override;

  // ca_rotations.cc
  Result<std::optional<CaRotation>> GetCaRotation(const std::string& kind) override;
  Result<CaRotation> PrepareCaRotation(const CaRotation& rotation, const std::string& detail_json, const Actor& actor,
                                       int64_t now) override;
  Result<CaRotation> SwitchCaRotation(const std::string& kind, const std::string& next_sha256,
                                      const std::string& detail_json, const Actor& actor, int64_t now) override;
  Status RetireCaRotation(const std::string& kind, const std::string& next_sha256, const std::string& detail_json,
                          const Actor& actor, int64_t now) override;

  // store.cc
  WriteStats GetWriteStats() const override;

 protected:
  explicit SqlStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}

  std::unique_ptr<Database> db_;
};

// The SQLite backend (sqlite_store.cc): the embedded default.
class SqliteStore final : public SqlStore {
 public:
  // Store::Open's contract.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const StoreOptions& options);
  Status Backup(const std::string& dest_path) override;

 private:
  SqliteStore(std::string path, std::unique_ptr<Database> db) : SqlStore(std::move(db)), path_(std::move(path)) {}

  const std::string path_;
};

// The PostgreSQL backend (postgres_store.cc): one database that several
// appliances share (docs/storage.md, "PostgreSQL").
class PostgresStore final : public SqlStore {
 public:
  // Connects to `url` (postgresql://...), migrates (MigratePostgres), and
  // opens the Database over PgConnections. db_unavailable when the server
  // cannot be reached; no message carries the URL or its password.
  static Result<std::unique_ptr<Store>> Open(const std::string& url, const StoreOptions& options);
  ~PostgresStore() override;

  // backup_unsupported (kUnsupported): pg_basebackup or pg_dump back up a
  // PostgreSQL database (docs/ha.md).
  Status Backup(const std::string& dest_path) override;
  // A thread of the store's own, with a connection of its own, LISTENs on
  // rackgate_changes and calls the listener with each payload ("pools",
  // "machines") that another process's commit sent, and with "*" each time
  // it (re)connects; it reconnects with a backoff (100 ms doubling to 5 s).
  // Started by the first call; stopped and joined by the destructor.
  void SetChangeListener(ChangeListener listener) override;

 private:
  struct Shared;
  PostgresStore(std::string url, std::shared_ptr<Shared> shared, std::unique_ptr<Database> db);
  void Listen();

  const std::string url_;
  std::shared_ptr<Shared> shared_;
  std::thread listener_thread_;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SQL_STORE_H_
