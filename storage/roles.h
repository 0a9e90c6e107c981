// The store's roles: one interface per core service, each the narrowest set
// of methods that service calls (docs/storage.md, "Roles"). storage::Store
// (storage/store.h) is their union and the contract written there holds for
// every method here: Status/Result with a stable reason, time passed in, one
// transaction and one audit row per change. Reads shared by several roles
// live in small bases inherited virtually (PoolReader, MachineReader,
// DecisionAudit), so a Store has one of each.
#ifndef RACKGATE_STORAGE_ROLES_H_
#define RACKGATE_STORAGE_ROLES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/types.h"

namespace rackgate::storage {

// The pools' rows as stored, read-only: what every service that serves or
// judges a machine of a pool reads.
class PoolReader {
 public:
  virtual ~PoolReader() = default;
  PoolReader(const PoolReader&) = delete;
  PoolReader& operator=(const PoolReader&) = delete;

  virtual Result<Pool> GetPool(const std::string& name) = 0;  // pool_unknown
  virtual Result<std::vector<Pool>> ListPools() = 0;
  // The pool's tokens still valid at `now`: the current one first.
  virtual Result<std::vector<PoolToken>> ValidPoolTokens(const std::string& pool, int64_t now) = 0;
  // GetPool and ValidPoolTokens in one read (one snapshot): what serving
  // /config/{pool} needs per request.
  virtual Result<std::pair<Pool, std::vector<PoolToken>>> GetPoolWithTokens(const std::string& name, int64_t now) = 0;

 protected:
  PoolReader() = default;
};

// Machines as stored, read-only.
class MachineReader {
 public:
  virtual ~MachineReader() = default;
  MachineReader(const MachineReader&) = delete;
  MachineReader& operator=(const MachineReader&) = delete;

  virtual Result<Machine> FindMachineByEkHash(const Bytes& ek_hash) = 0;  // machine_unknown (kNotFound)
  virtual Result<Machine> GetMachine(const std::string& hostname) = 0;   // hostname_unknown
  virtual Result<Machine> GetMachineById(int64_t id) = 0;                // machine_unknown
  virtual Result<std::vector<Machine>> ListMachines(const MachineFilter& filter = {}) = 0;

 protected:
  MachineReader() = default;
};

// One audit row for a decision about a machine that changes no state: the
// refusals of the attestation and CSR services.
class DecisionAudit {
 public:
  virtual ~DecisionAudit() = default;
  DecisionAudit(const DecisionAudit&) = delete;
  DecisionAudit& operator=(const DecisionAudit&) = delete;

  // One audit row for a decision that changes no state (e.g. a refused CSR),
  // about `machine_id`. `detail_json` is a JSON object and never a secret.
  // machine_unknown.
  virtual Status AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                                   const Actor& actor, int64_t now) = 0;

 protected:
  DecisionAudit() = default;
};

// What core::AttestationService needs: the discovery of an unknown EK,
// sessions (one use, expiry), the verdict of evidence with its session in one
// transaction, bearer tokens, and the boot observations of observing pools.
class AttestationStore : public virtual PoolReader, public virtual MachineReader, public virtual DecisionAudit {
 public:
  virtual ~AttestationStore() = default;
  AttestationStore(const AttestationStore&) = delete;
  AttestationStore& operator=(const AttestationStore&) = delete;

  // Enrolls a machine; the EK is its identity and is immutable:
  //  - new hostname, new EK: inserted in e.state (enrolled or pending), audited
  //    as enroll.
  //  - EK enrolled under another hostname: ek_in_use.
  //  - hostname enrolled with another EK: ek_conflict, unless replace_ek; the
  //    replacement (audited as replace_ek with old and new EK hash) also puts
  //    the machine in e.state, clears TOFU values and the client-certificate
  //    mark, and drops its open sessions and tokens: a new TPM starts over.
  //  - same hostname, same EK: the enrollment is the desired record. Pool,
  //    addresses, vars and policy are set to e's (vars and policy are
  //    opaque texts here, compared as texts); the EK certificate and its facts
  //    only when e carries a certificate. A pending machine enrolled as
  //    enrolled moves to enrolled. Any other state is kept (a revoked machine
  //    stays revoked: Reset is the explicit way back). Audited as
  //    enroll_update only when something changed; otherwise a no-op.
  // Also pool_unknown, hostname_invalid, state_invalid, field_invalid.
  virtual Result<Machine> Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now) = 0;
  // field_invalid when the id is empty, not printable ASCII or taken;
  // machine_unknown. The machine's state is the caller's to check (and
  // RecordAttestationSuccess refuses pending and revoked machines).
  virtual Status CreateSession(const Session& session) = 0;
  // Single use: atomically marks the session used and returns it.
  // session_unknown, session_used, session_expired.
  virtual Result<Session> ConsumeSession(const std::string& id, int64_t now) = 0;
  // The machine a token belongs to, the token and the machine's pool, in one
  // read snapshot: token_unknown, token_expired, and token_revoked when its
  // machine is revoked.
  virtual Result<Bearer> LookupToken(const Bytes& token_hash, int64_t now) = 0;
  // The machine enrolled with this EK hash (machine_unknown) and its pool,
  // in one read snapshot: what a challenge is answered from.
  virtual Result<ChallengeInputs> ReadChallenge(const Bytes& ek_hash) = 0;
  // The session (session_unknown, session_used, session_expired at `now`),
  // its machine (machine_unknown), the machine's
  // LastSuccessfulAttestation and its pool, in one read snapshot. Consumes nothing: the
  // write that records the verdict does.
  virtual Result<EvidenceInputs> ReadEvidence(const std::string& session_id, int64_t now) = 0;
  // ConsumeSession(record.session_id, now) and RecordAttestationSuccess, in
  // ONE transaction: the session is marked used (its checks made under the
  // writer lock, so of two racing requests one gets session_used) only
  // together with the verdict, and a refusal changes nothing.
  virtual Result<Machine> ConsumeSessionAndRecordSuccess(const AttestationRecord& record, const Token& token,
                                                         const std::optional<std::string>& tofu_pcrs_json,
                                                         int64_t now) = 0;
  // ConsumeSession(record.session_id, now) and RecordAttestationFailure, in
  // ONE transaction.
  virtual Status ConsumeSessionAndRecordFailure(const AttestationRecord& record, int64_t now) = 0;
  // One transaction: inserts the record (verdict ok), moves enrolled ->
  // attested (attested/provisioned/joined keep their state: a reboot
  // re-attests), sets last_attested_at, records the TOFU values when given,
  // inserts the token, and writes one audit row (attest); the machine becomes
  // trusted, with a second row (trusted) only when it was untrusted. state_conflict when
  // the machine is pending or revoked. Returns the machine after the change.
  virtual Result<Machine> RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                                   const std::optional<std::string>& tofu_pcrs_json) = 0;
  // Inserts a refused record (never changes state: refusals are in the
  // attestations table, bounded per machine by max_failures_per_machine).
  // The machine becomes untrusted; an audit row (untrusted) is written only
  // when its trust changes (docs/trust.md). Failures for unknown EKs have no machine and
  // are not stored at all; the daemon logs them.
  virtual Status RecordAttestationFailure(const AttestationRecord& record) = 0;
  // The newest ok record since the machine's EK was enrolled or replaced and
  // since its last Reset (attestation_unknown when none): the baseline for the
  // TPM's reset/restart counters and clock. Reset starts a new baseline, so an
  // operator can re-admit a machine whose TPM was cleared.
  virtual Result<AttestationRecord> LastSuccessfulAttestation(int64_t machine_id) = 0;
  // The newest refused records over all machines, newest first.
  virtual Result<std::vector<AttestationRecord>> RecentFailures(int limit = 50) = 0;
  // Replaces the machine's observation. machine_unknown, field_invalid (a
  // log above wire's 16 MiB, more than kMaxReasons violations).
  virtual Status RecordBootObservation(const BootObservation& observation) = 0;

 protected:
  AttestationStore() = default;
};

// What core::CsrService and the manual approval (core/csr_approval.h) need:
// issued certificates, renewals, the certify nonce's one use and the queue of
// CSRs waiting for an operator.
class CsrStore : public virtual DecisionAudit {
 public:
  virtual ~CsrStore() = default;
  CsrStore(const CsrStore&) = delete;
  CsrStore& operator=(const CsrStore&) = delete;

  // Records a signed certificate, in one transaction with its audit row
  // (certificate_issued). For kCertClient also sets the client-certificate
  // mark (client_cert_already_issued when set: only Reset clears it) and
  // moves attested/provisioned -> joined. For kCertServing the machine must
  // be provisioned or joined (state_conflict). field_invalid when the serial
  // is taken.
  virtual Result<Machine> RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now) = 0;
  // The client certificate issued to the machine since its last reset for
  // the key with this SHA-256, if any (certificate_unknown otherwise).
  virtual Result<IssuedCertificate> FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256) = 0;
  // The certificate with this serial (any machine's), with replaced_by and
  // since_reset filled: certificate_unknown (kNotFound).
  virtual Result<IssuedCertificate> GetCertificate(const std::string& serial) = 0;
  // Newest first; hostname "" for every machine.
  virtual Result<std::vector<IssuedCertificate>> ListCertificates(const std::string& hostname, int limit = 1000) = 0;
  // Records `cert` as the renewal of the certificate `replaces`, in one
  // transaction with ONE audit row (certificate_renewed, detail serial,
  // replaces, kind): inserts it, marks `replaces` replaced_by it, keeps the
  // client-certificate mark and the state. Checked in the transaction:
  // the machine is joined (state_conflict); `replaces` is a certificate of
  // this machine, of cert.kind, signed since its last reset or EK
  // replacement and not yet replaced (kVerificationFailed
  // renewal_proof_invalid); field_invalid as RecordCertificate.
  virtual Result<Machine> RecordRenewal(const IssuedCertificate& cert, const std::string& replaces,
                                        const Actor& actor, int64_t now) = 0;
  // Everything an issued certificate changes (IssuedCertificateRecord), in
  // ONE transaction with ONE audit row, so a crash or a refusal leaves none
  // of it: first the certify nonce is consumed (certify_nonce_used,
  // token_unknown), then the certificate is recorded as RecordRenewal records
  // it when `replaces` is set (certificate_renewed) and as RecordCertificate
  // does otherwise (certificate_issued; a client certificate sets the mark
  // and joins the machine), with their refusals. A refusal changes nothing.
  virtual Result<Machine> RecordIssuedCertificate(const IssuedCertificateRecord& record, const Actor& actor,
                                                  int64_t now) = 0;
  // Marks the token's session nonce used as a TPM2_Certify's qualifying
  // data, atomically: certify_nonce_used (kVerificationFailed) when it
  // already was, token_unknown. No audit row (as ConsumeSession): the
  // certificate it leads to is audited.
  virtual Status ConsumeCertifyNonce(const Bytes& token_hash, int64_t now) = 0;
  // The machine's request for r.kind and r.public_key_sha256 in its current
  // attest epoch, in whatever state it is; when there is none, inserts r as
  // waiting (audited as csr_waiting, once). A new request is refused
  // csr_flood_machine (kUnsupported) when the machine already has
  // limits.max_waiting_per_machine waiting, csr_flood when the appliance has
  // limits.max_waiting. machine_unknown, field_invalid.
  virtual Result<CsrApprovalRequest> QueueCsrRequest(const CsrApprovalRequest& r, const CsrQueueLimits& limits,
                                                     const Actor& actor, int64_t now) = 0;
  // waiting -> approved (audited csr_approved) or denied with `deny_reason`
  // (audited csr_denied; the reason is 1..256 printable characters).
  // csr_request_unknown (kNotFound); state_conflict when already decided.
  virtual Result<CsrApprovalRequest> DecideCsrRequest(int64_t id, bool approve, const std::string& deny_reason,
                                                      const Actor& actor, int64_t now) = 0;
  // Waiting requests of current epochs, oldest first; `all`: every request,
  // newest first. At most `limit`.
  virtual Result<std::vector<CsrApprovalRequest>> ListCsrRequests(bool all, int limit = 1000) = 0;

 protected:
  CsrStore() = default;
};

// What core's approver mode needs (core/kube_approver.h; docs/kubernetes.md):
// the keys machines proved through attested sessions, and the decisions
// about certificates.k8s.io CSRs, each recorded before the API server is
// told, so a restart or a second appliance never decides a CSR twice.
class KubeApprovalStore : public virtual MachineReader, public virtual PoolReader, public virtual DecisionAudit {
 public:
  virtual ~KubeApprovalStore() = default;
  KubeApprovalStore(const KubeApprovalStore&) = delete;
  KubeApprovalStore& operator=(const KubeApprovalStore&) = delete;

  // Registers a key the machine proved (AttestedKey), in ONE transaction with
  // ONE audit row (kubelet_key_registered: kind, key hash, tpm_resident), in
  // the machine's current attest epoch. The same machine, kind and key again
  // in the same epoch returns the row as stored, with no second audit row.
  // When `certify_token_hash` is set (a TPM-resident key proven with a
  // TPM2_Certify over that token's session nonce), that nonce is consumed in
  // the same transaction (certify_nonce_used, token_unknown). Refused:
  // machine_unknown; state_conflict unless the machine is attested,
  // provisioned or joined; field_invalid (kind, a hash of 32 bytes).
  // The machine and its state are checked first; a repeat is then answered
  // before the token is looked at, so an agent's retry after a lost answer
  // succeeds without a nonce. A token of another machine is token_unknown
  // (it proves nothing about this one) and stays unused.
  virtual Result<AttestedKey> RegisterAttestedKey(const AttestedKey& key, const std::optional<Bytes>& certify_token_hash,
                                                  const Actor& actor, int64_t now) = 0;
  // The machine's registration of this kind and key in its current attest
  // epoch: key_unknown (kNotFound) when there is none.
  virtual Result<AttestedKey> FindAttestedKey(int64_t machine_id, const std::string& kind,
                                              const Bytes& public_key_sha256) = 0;
  // The decision recorded for the API CSR `uid`: kube_csr_unknown (kNotFound).
  virtual Result<KubeCsrDecision> GetKubeCsr(const std::string& uid) = 0;
  // Records d (decision approved, denied or waiting; decided_at = now unless
  // waiting) in ONE transaction with ONE audit row about d.machine_id
  // (kubernetes_csr_approved, kubernetes_csr_denied or kubernetes_csr_waiting;
  // detail: name, uid, kind, purpose, reason, key hash, requester). A uid
  // already recorded: kube_csr_decided (kInvalidArgument) and nothing changes
  // (the caller reads the recorded one with GetKubeCsr and carries it out).
  // An approved join is checked in the transaction: the key is registered
  // for this machine and kind in its current epoch and unused
  // (key_not_attested, kVerificationFailed; it is then marked used by d.uid);
  // the client-certificate mark is not set (client_cert_already_issued) and is
  // set now; attested/provisioned -> joined (state_conflict from other states
  // but joined). machine_unknown, field_invalid. A refusal changes nothing.
  // field_invalid (storage/validation.h, CheckKubeCsrDecision): uid, name,
  // reason, requester, message and decided_by bounded and printable; kind,
  // purpose and decision among theirs, join and rotation client and serving
  // serving; a key hash of 32 bytes, which only a denial may lack. reason,
  // message and decided_by are stored as given. The join's checks run in
  // the order above (key, mark, state); an approved rotation or serving CSR
  // is the caller's to judge, but needs a machine that joined in its
  // current epoch (joined, client-certificate mark set: machine_not_joined,
  // kInvalidArgument, otherwise; a reset or a new EK clears both, and also
  // denies the machine's waiting CSRs, reason machine_reset).
  virtual Result<KubeCsrDecision> RecordKubeCsr(const KubeCsrDecision& d, const Actor& actor, int64_t now) = 0;
  // An operator's decision on a waiting one: waiting -> approved or denied
  // (with `reason`, 1..256 printable characters, when denied), with the same
  // checks and effects as RecordKubeCsr for an approved one, and one audit
  // row (kubernetes_csr_approved / kubernetes_csr_denied, actor the
  // operator). kube_csr_unknown; state_conflict when already decided.
  // decided_by becomes the actor's name; an approval keeps the recorded
  // reason, a denial replaces it with `reason`.
  virtual Result<KubeCsrDecision> DecideKubeCsr(const std::string& uid, bool approve, const std::string& reason,
                                                const Actor& actor, int64_t now) = 0;
  // Newest first (waiting_only: only waiting ones, oldest first), at most `limit`
  // (clamped to 1..100000); by created_at, ties broken by uid.
  virtual Result<std::vector<KubeCsrDecision>> ListKubeCsrs(bool waiting_only, int limit = 1000) = 0;

 protected:
  KubeApprovalStore() = default;
};

// What core::IgnitionService (with its PoolCache) and core::ReportService
// need: the pool with its provisioning tokens, the attested config served and
// the agents' provisioning reports.
class IgnitionStore : public virtual PoolReader {
 public:
  virtual ~IgnitionStore() = default;
  IgnitionStore(const IgnitionStore&) = delete;
  IgnitionStore& operator=(const IgnitionStore&) = delete;

  // One audit row (config_served) per attested config served, with the
  // caller's digest of the bytes; attested -> provisioned on the first one,
  // later ones keep the state. state_conflict for pending, enrolled, revoked.
  virtual Result<Machine> RecordConfigServed(int64_t machine_id, const std::string& digest, const std::string& version,
                                             const Actor& actor, int64_t now) = 0;
  // Replaces the machine's last provisioning report (no audit row: a report
  // is the agent's account, not a state change). machine_unknown,
  // field_invalid (outcome not ok/failed, a field over its bound).
  virtual Status RecordReport(const ProvisioningReportRecord& report) = 0;
  // report_unknown (kNotFound) when the machine never reported.
  virtual Result<ProvisioningReportRecord> LastReport(int64_t machine_id) = 0;
  // Every machine's last report, by machine id.
  virtual Result<std::map<int64_t, ProvisioningReportRecord>> ListLastReports() = 0;

 protected:
  IgnitionStore() = default;
};

// What core::PolicyService needs: a pool's boot policy and mode, and the
// boots observed in it (docs/policy.md, "Observe").
class PolicyStore : public virtual PoolReader {
 public:
  virtual ~PolicyStore() = default;
  PolicyStore(const PolicyStore&) = delete;
  PolicyStore& operator=(const PolicyStore&) = delete;

  // Changes a pool's boot policy and/or mode in one transaction with one
  // audit row (action "pool_policy"; detail: pool, mode before and after,
  // SHA-256 of the policy before and after, and the caller's detail).
  // pool_unknown; field_invalid (a mode other than enforce/observe, a detail
  // that is not a JSON object or too large). A change that changes nothing
  // writes nothing and returns the pool.
  virtual Result<Pool> SetPoolBootPolicy(const PoolPolicyChange& change, const Actor& actor, int64_t now) = 0;
  // The observations of the machines now in `pool`, by hostname.
  virtual Result<std::vector<BootObservation>> ListBootObservations(const std::string& pool) = 0;

 protected:
  PolicyStore() = default;
};

// Trust over time (docs/trust.md): the sweep of core::SweepTrust and its metric.
class TrustStore : public virtual PoolReader {
 public:
  virtual ~TrustStore() = default;
  TrustStore(const TrustStore&) = delete;
  TrustStore& operator=(const TrustStore&) = delete;

  // RecordAttestationSuccess makes the machine trusted and
  // RecordAttestationFailure untrusted (reason "attestation_failed:<reason>"),
  // each with one audit row (trusted / untrusted, detail {"reason"}) only when
  // the trust changes; a machine's first good attestation sets trusted with
  // no audit row beyond attest's. Neither changes a state through trust.
  //
  // The sweep: every machine of a pool in `max_age_by_pool` (pool -> seconds;
  // the caller reads the pools' settings, storage never does) whose last good
  // attestation is older than that (now - last_attested_at > age) and which
  // is not untrusted already becomes untrusted (reason attestation_too_old),
  // one audit row each (actor "rackgated"). Pending and revoked machines are
  // skipped. At most `batch` machines per call, in one transaction; returns
  // them after the change (call again while the count equals `batch`).
  virtual Result<std::vector<Machine>> MarkStaleUntrusted(int64_t now,
                                                          const std::map<std::string, int64_t>& max_age_by_pool,
                                                          int batch = 1000) = 0;
  // Machines whose trust is untrusted (a metric).
  virtual Result<int64_t> CountUntrusted() = 0;

 protected:
  TrustStore() = default;
};

// The operator's inventory, through the admin API and rackgatectl: pools,
// enrollment and import, and every state change an operator makes.
class InventoryStore : public virtual PoolReader, public virtual MachineReader {
 public:
  virtual ~InventoryStore() = default;
  InventoryStore(const InventoryStore&) = delete;
  InventoryStore& operator=(const InventoryStore&) = delete;

  // Creates or replaces the pool's settings and boot policy, and sets the
  // `templates` given, all in one transaction with one audit row (pool_put;
  // it names the pool and the templates' digests, never the settings' or a
  // template's content): all of it is stored, or nothing. Templates not
  // named in `templates` are kept; token_required is written as given.
  // `first_token_hash`, when given, becomes the pool's current provisioning
  // token if it has none; `*outcome` (may be null) says whether it did, so
  // the caller shows exactly the token it stored. field_invalid for a
  // template `which` other than public or attested, pool_invalid.
  virtual Result<Pool> PutPool(const Pool& pool, const Actor& actor, int64_t now,
                               const std::optional<Bytes>& first_token_hash = std::nullopt,
                               const std::vector<PoolTemplateChange>& templates = {},
                               PoolPutOutcome* outcome = nullptr) = 0;
  // Sets (or, with nullopt, removes) the pool's kTemplatePublic or
  // kTemplateAttested template. Audited as pool_template_put with the
  // caller's digest of the text, never the text. field_invalid for another
  // `which`; pool_unknown.
  virtual Result<Pool> SetPoolTemplate(const std::string& pool, std::string_view which,
                                       const std::optional<std::string>& template_json, const std::string& digest,
                                       const Actor& actor, int64_t now) = 0;
  // Makes `new_hash` the pool's current provisioning token. The current one
  // becomes the previous one, valid until `previous_valid_until` (dropped at
  // once when that is <= now); an older previous token is dropped. Audited
  // as token_rotate. pool_unknown; field_invalid when the hash is taken.
  virtual Status RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                                 const Actor& actor, int64_t now) = 0;
  // Enroll with the caller's merge (EnrollMerge, called as merge(0, ...)):
  // the merge decides the machine as it will be (for an operator's re-enroll,
  // which must never lose addresses, template values or a policy it was not
  // told to change; also for replace_ek: the new TPM keeps what the merge
  // keeps) and the changes in words; the store checks and writes it by
  // Enroll's rules, in the same transaction as the read of the stored
  // machine. Returns what was done (EnrollOutcome); one audit row (enroll,
  // enroll_update with the changed fields, or replace_ek) unless unchanged.
  // ek_in_use names the hostname that holds the EK and the commands that
  // free it. The merge's refusals are returned as it made them.
  virtual Result<EnrollOutcome> EnrollMerged(const Enrollment& e, const EnrollMerge& merge, const Actor& actor,
                                             bool replace_ek, int64_t now) = 0;
  // Enrolls every row, with EnrollMerged's rules (replace_ek false; the
  // merge called with the row's index), in ONE transaction: all or nothing.
  // First, before anything is written, the rows are checked against each
  // other: the same hostname or the same EK twice is import_duplicate
  // (kInvalidArgument), naming both rows' `where`. A row's failure keeps its
  // reason and names it ("line 12 (node-12): ..."). One audit row per
  // changed machine plus one import row with the counts. With
  // options.dry_run the same work is done and rolled back: nothing is
  // stored, and the report says what would have been. An exception thrown by
  // `progress` rolls the import back and propagates.
  virtual Result<ImportReport> Import(const std::vector<ImportRow>& rows, const EnrollMerge& merge,
                                      const ImportOptions& options, const Actor& actor, int64_t now,
                                      const ImportProgress& progress = nullptr) = 0;
  // pending -> enrolled (audited as approve).
  virtual Result<Machine> Approve(const std::string& hostname, const Actor& actor, int64_t now) = 0;
  // pending -> enrolled like Approve, and in the same transaction (one audit
  // row, approve, with old and new hostname in its detail) the changes:
  // rename, move to another pool, replace the addresses and vars.
  // hostname_taken (kInvalidArgument) when another machine has the new
  // hostname (the message names it); pool_unknown, hostname_invalid,
  // field_invalid, state_conflict, hostname_unknown.
  virtual Result<Machine> Approve(const std::string& hostname, const ApprovalChanges& changes, const Actor& actor,
                                  int64_t now) = 0;
  // any -> revoked (audited as revoke); revoked already: a no-op. Its tokens
  // stop resolving at once (token_revoked).
  virtual Result<Machine> Revoke(const std::string& hostname, const Actor& actor, int64_t now) = 0;
  // attested/provisioned/joined -> enrolled (audited as reset): clears the
  // TOFU values and the client-certificate mark, drops open sessions and
  // tokens, so the machine must attest again and may join once more. A
  // revoked machine only when `unrevoke` (machine_revoked, kInvalidArgument,
  // otherwise): revoked is terminal until an operator lifts it in so many
  // words, checked in the same transaction as the change, so that a revoke
  // landing between an operator's look and the reset is never undone.
  virtual Result<Machine> Reset(const std::string& hostname, const Actor& actor, int64_t now, bool unrevoke) = 0;
  // Moves the machine to `to` when its current state is one of `from`, checked
  // in the same transaction as the change (state_conflict otherwise, and
  // nothing changes). Audited under `action`. When the machine is already in
  // `to` and `to` is in `from`, it is a no-op (no audit row).
  // state_invalid when `to` or a `from` is outside MachineState.
  virtual Result<Machine> Transition(int64_t machine_id, const std::vector<MachineState>& from, MachineState to,
                                     const Actor& actor, const std::string& action, int64_t now) = 0;
  // Deletes a pending, enrolled or revoked machine (machine_active,
  // kInvalidArgument, for any other state: the message names the fix,
  // `rackgatectl revoke HOST`). Its addresses, sessions, tokens,
  // attestations, CSR requests and last report go with it; its certificates,
  // audit rows and events stay (history), and its certificates are marked
  // never current again (attest_epoch -1), since SQLite may give a later
  // machine the same id. Its EK and hostname are free afterwards. Audited as
  // machine_deleted (detail ek_hash, state). Returns the machine as it was.
  // hostname_unknown.
  virtual Result<Machine> DeleteMachine(const std::string& hostname, const Actor& actor, int64_t now) = 0;
  // Renames a pending, enrolled or revoked machine (machine_active otherwise:
  // a machine that attested must be reset first, as its certificates name
  // system:node:OLD), keeping its state, EK and history; an address of kind
  // Hostname equal to the old name follows. Audited as machine_renamed
  // (detail from, to). hostname_invalid, hostname_taken (the message names
  // the holder), hostname_unknown. The same name again is a no-op.
  virtual Result<Machine> RenameMachine(const std::string& hostname, const std::string& new_hostname,
                                        const Actor& actor, int64_t now) = 0;

 protected:
  InventoryStore() = default;
};

// Webhook events (docs/events.md). Events are written by triggers in the
// transaction of the change they report; these methods keep the webhooks and
// their deliveries. Delivery bookkeeping is no operator action and writes no
// audit row.
class EventStore {
 public:
  virtual ~EventStore() = default;
  EventStore(const EventStore&) = delete;
  EventStore& operator=(const EventStore&) = delete;

  // Makes the stored webhooks exactly `hooks` (by URL): new ones are added
  // (they get events from now on, not the past's), filters are updated, and
  // webhooks no longer configured are dropped with their deliveries. Returns
  // the number of undelivered deliveries dropped that way. field_invalid for
  // an empty or duplicate URL.
  virtual Result<int64_t> SyncWebhooks(const std::vector<WebhookTarget>& hooks, int64_t now) = 0;
  // Up to `limit` undelivered deliveries with next_attempt_at <= now, the
  // longest waiting first, each with its event.
  virtual Result<std::vector<DueDelivery>> DueDeliveries(int64_t now, int limit) = 0;
  // DueDeliveries for a sender, when several appliances send from one
  // database: in one write transaction, each due delivery returned has its
  // next_attempt_at pushed to now + lease_seconds, so no other appliance's
  // dispatcher takes it while this one sends it. A delivery another
  // appliance claimed first (after this one read it) is left out. The
  // sender's RecordDeliveryAttempt then sets the real next_attempt_at; a
  // sender that dies first leaves the claim to expire, and the delivery is
  // sent again (at least once, never lost). field_invalid for a lease < 1.
  virtual Result<std::vector<DueDelivery>> ClaimDueDeliveries(int64_t now, int limit, int64_t lease_seconds) = 0;
  // Records one attempt: attempts + 1, and either delivered_at = now or
  // next_attempt_at and last_error (at most 512 bytes kept). A delivery that
  // is gone (purged, webhook dropped) or already delivered is left alone.
  virtual Status RecordDeliveryAttempt(int64_t event_id, const std::string& webhook, bool delivered,
                                       int64_t next_attempt_at, const std::string& error, int64_t now) = 0;
  // Events, newest first, with their deliveries.
  virtual Result<std::vector<Event>> ListEvents(const EventFilter& filter = {}) = 0;
  // Deliveries not yet delivered (the queue's depth).
  virtual Result<int64_t> CountPendingDeliveries() = 0;
  // Deletes events with at < older_than, then, while more than
  // `keep_at_most` are left, the oldest delivered ones (no delivery
  // pending) and only then the oldest undelivered, with their deliveries.
  // Returns how many.
  virtual Result<int64_t> PurgeEvents(int64_t older_than, int64_t keep_at_most) = 0;

 protected:
  EventStore() = default;
};

// The audit log (docs/audit.md): listing it, verifying its chain, and the
// admin API's refusals.
class AuditStore : public virtual DecisionAudit {
 public:
  virtual ~AuditStore() = default;
  AuditStore(const AuditStore&) = delete;
  AuditStore& operator=(const AuditStore&) = delete;

  // Observability (docs/observability.md): one audit row `admin_refused`
  // for a refused admin request. `detail_json` is a JSON object (method,
  // route, reason, user, uid), never a secret. The row names the machine
  // when `hostname` is one the store knows; otherwise machine_id is NULL
  // (an unknown hostname is no error: the refusal is recorded all the same).
  virtual Status AuditAdminRefusal(const std::string& hostname, const std::string& detail_json, const Actor& actor,
                                   int64_t now) = 0;
  // One audit row about the appliance itself, naming no machine (a stage of
  // the cluster CA's rotation, docs/operations.md). `action` is 1 to 64
  // bytes, `detail_json` a JSON object, never a secret. field_invalid.
  virtual Status AuditApplianceEvent(const std::string& action, const std::string& detail_json, const Actor& actor,
                                     int64_t now) = 0;
  virtual Result<std::vector<AuditEntry>> ListAudit(const AuditFilter& filter = {}) = 0;
  // Walks the whole audit chain in one snapshot: a report, intact or naming
  // the first broken row (a broken chain is a report, not a failure). With
  // an anchor, the row with its id must exist and have its hash.
  virtual Result<AuditChainReport> VerifyAuditChain(const std::optional<AuditAnchor>& anchor = std::nullopt) = 0;

 protected:
  AuditStore() = default;
};

// The fleet's appliance CA rotation (docs/operations.md, "Rotating the
// appliance CA"): one record per kind, each stage change one transaction
// with one audit row (ca_rotation_prepared|switched|retired, detail
// {"kind", ...}). Reasons (kInvalidArgument): ca_rotation_in_progress
// (prepare while one runs), ca_rotation_none (no rotation to change),
// ca_rotation_stage (retire before any switch), ca_next_mismatch (the next
// CA given is not the recorded one); field_invalid.
class CaRotationStore {
 public:
  virtual ~CaRotationStore() = default;
  CaRotationStore(const CaRotationStore&) = delete;
  CaRotationStore& operator=(const CaRotationStore&) = delete;

  // The record of `kind`, or nullopt when none runs.
  virtual Result<std::optional<CaRotation>> GetCaRotation(const std::string& kind) = 0;
  // Records `rotation` at stage prepared (its stage, prepared_at and
  // switched_at are set here). `detail_json` (an object, never a secret)
  // goes into the audit row with kind and both fingerprints.
  virtual Result<CaRotation> PrepareCaRotation(const CaRotation& rotation, const std::string& detail_json,
                                               const Actor& actor, int64_t now) = 0;
  // One appliance switched to the next CA, whose fingerprint it holds:
  // the stage becomes switched (switched_at kept from the first one); an
  // audit row for every appliance's switch.
  virtual Result<CaRotation> SwitchCaRotation(const std::string& kind, const std::string& next_sha256,
                                              const std::string& detail_json, const Actor& actor, int64_t now) = 0;
  // The rotation ends: the record goes (stage switched required).
  virtual Status RetireCaRotation(const std::string& kind, const std::string& next_sha256,
                                  const std::string& detail_json, const Actor& actor, int64_t now) = 0;

 protected:
  CaRotationStore() = default;
};

// What the daemon's housekeeping and metrics need, and what no service
// calls: purging, counts, write statistics, backups and the change listener.
class MaintenanceStore {
 public:
  virtual ~MaintenanceStore() = default;
  MaintenanceStore(const MaintenanceStore&) = delete;
  MaintenanceStore& operator=(const MaintenanceStore&) = delete;

  // Deletes up to `batch` sessions and up to `batch` tokens with
  // expires_at <= now. Call repeatedly until both counts are below `batch`.
  virtual Result<PurgeCounts> PurgeExpired(int64_t now, int batch = 1000) = 0;
  // Machines per state, by StateName(); every state is present (0 when none).
  virtual Result<std::map<std::string, int64_t>> CountByState() = 0;
  // Sessions issued and neither used nor expired at `now` (a metric).
  virtual Result<int64_t> CountOpenSessions(int64_t now) = 0;

  // Writes are committed in groups (docs/storage.md, "Group commit"): the
  // write transactions committed since Open, and the writes they carried;
  // and every round trip since Open: statements executed and transactions
  // run, reads included (docs/storage.md, "Statements and writes per
  // machine").
  struct WriteStats {
    uint64_t commits = 0;
    uint64_t writes = 0;
    uint64_t statements = 0;
    uint64_t transactions = 0;
  };
  virtual WriteStats GetWriteStats() const = 0;

  // A consistent copy of the live database at `dest_path` (VACUUM INTO),
  // while other threads keep working. Fails when dest_path exists.
  virtual Status Backup(const std::string& dest_path) = 0;

  // Changes made by OTHER processes sharing this database (several
  // appliances on one PostgreSQL) are announced to `listener` with the
  // topic changed: "pools" (a pool, its templates or provisioning tokens),
  // "machines", or "*" (anything may have changed: the announcements were
  // interrupted, as after a reconnect). Called on a thread of the store's
  // own; the listener must be quick and thread-safe (drop a cache entry, no
  // store call). One listener; a later call replaces it, nullptr removes
  // it. A backend whose database has one process (SQLite) never calls it.
  using ChangeListener = std::function<void(std::string_view topic)>;
  virtual void SetChangeListener(ChangeListener listener) { (void)listener; }

 protected:
  MaintenanceStore() = default;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_ROLES_H_
