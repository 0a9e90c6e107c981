// The values the enrollment store reads and writes (docs/storage.md): the
// same for every backend.
#ifndef RACKGATE_STORAGE_TYPES_H_
#define RACKGATE_STORAGE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::storage {

using Bytes = std::vector<uint8_t>;

// A machine's state (docs/storage.md, "A machine's life"). The database
// stores StateName()'s text, so the names are part of the file format.
enum class MachineState { kPending, kEnrolled, kAttested, kProvisioned, kJoined, kRevoked };

// Every state, in the order above.
inline constexpr MachineState kAllMachineStates[] = {MachineState::kPending,     MachineState::kEnrolled,
                                                     MachineState::kAttested,    MachineState::kProvisioned,
                                                     MachineState::kJoined,      MachineState::kRevoked};

// "pending", "enrolled", "attested", "provisioned", "joined", "revoked";
// "" for a value outside the enum.
std::string_view StateName(MachineState state);
// The state named `name` (exactly, lower case); nullopt for anything else.
std::optional<MachineState> ParseMachineState(std::string_view name);
// Whether ParseMachineState(state) has a value.
bool IsValidState(std::string_view state);
// StateName's text, so that tests and streams print names, not numbers.
std::ostream& operator<<(std::ostream& out, MachineState state);

// Kubernetes NodeAddress types.
inline constexpr std::string_view kAddressInternalIP = "InternalIP";
inline constexpr std::string_view kAddressExternalIP = "ExternalIP";
inline constexpr std::string_view kAddressInternalDNS = "InternalDNS";
inline constexpr std::string_view kAddressExternalDNS = "ExternalDNS";
inline constexpr std::string_view kAddressHostname = "Hostname";
bool IsValidAddressKind(std::string_view kind);

// Who made a change, for the audit log: e.g. name "uid:1000(alice)",
// "discovery", "rackgated"; why is the operator's reason or the context.
struct Actor {
  std::string name;
  std::string why;
};

struct Address {
  std::string kind;  // one of kAddress*
  std::string value;
  bool operator==(const Address&) const = default;
};
// Sorted by (kind, value) and without duplicates, so that equal sets compare
// equal: a machine's addresses as stored.
std::vector<Address> NormalizeAddresses(std::vector<Address> a);

struct Pool {
  std::string name;  // [A-Za-z0-9._-], 1..63 chars, starts with a letter or digit
  std::string settings_json = "{}";           // opaque to storage
  std::optional<std::string> boot_policy_json;  // opaque; nullopt: no pool policy
  // Whether GET /config/{pool} needs the pool's provisioning token.
  bool token_required = true;
  // Ignition templates (opaque JSON texts); set with SetPoolTemplate only,
  // PutPool keeps them.
  std::optional<std::string> public_template;
  std::optional<std::string> attested_template;
  // kPolicyModeEnforce (the default) or kPolicyModeObserve (docs/policy.md,
  // "Observe"); set with SetPoolBootPolicy only, PutPool keeps it.
  std::string boot_policy_mode = "enforce";
  int64_t created_at = 0;  // set by storage
  int64_t updated_at = 0;  // set by storage
};

// What an operator (or discovery) enrolls. See Store::Enroll.
struct Enrollment {
  std::string hostname;  // a lowercase RFC 1123 subdomain (a Kubernetes node name)
  std::string pool;      // must exist
  Bytes ek_public;       // TPM2B_PUBLIC as the TPM marshals it
  Bytes ek_hash;         // the caller's hash of the EK; the machine's identity
  std::optional<Bytes> ek_certificate;  // DER
  std::string tpm_manufacturer;  // facts read from the EK certificate; "" if none
  std::string tpm_model;
  std::string tpm_version;
  std::vector<Address> addresses;
  std::optional<std::string> policy_json;  // per-machine boot policy, opaque
  MachineState state = MachineState::kEnrolled;  // kEnrolled or kPending
  // Operator-set values for template rendering: a JSON object, opaque here.
  std::string vars_json = "{}";
  // The anchor relaxations the EK certificate needed ("sha1", "expired-ca",
  // "no-ek-marks"; docs/ek-vendors.md): not stored with the machine, written
  // into the audit row's detail ("ek_relaxed") of the write that stores the
  // certificate.
  std::vector<std::string> ek_relaxations;
};

struct Machine {
  int64_t id = 0;
  std::string hostname;
  std::string pool;
  MachineState state = MachineState::kPending;
  Bytes ek_public;
  Bytes ek_hash;
  std::optional<Bytes> ek_certificate;
  std::string tpm_manufacturer;
  std::string tpm_model;
  std::string tpm_version;
  std::vector<Address> addresses;  // sorted by (kind, value)
  std::optional<std::string> policy_json;
  std::optional<std::string> tofu_pcrs_json;  // PCR values recorded on first use
  std::string vars_json = "{}";
  int64_t created_at = 0;
  int64_t updated_at = 0;
  std::optional<int64_t> last_attested_at;
  // When a kubelet client certificate was issued since the last reset.
  std::optional<int64_t> client_cert_issued_at;

  // --- Trust (docs/trust.md): orthogonal to the state. ----------------------
  // kTrustTrusted, kTrustUntrusted, or "" when the machine has never
  // attested (no verdict yet).
  std::string trust;
  // Why it is untrusted ("attestation_failed:<reason>", "attestation_too_old");
  // "" when trusted or never judged.
  std::string trust_reason;
  std::optional<int64_t> trust_changed_at;

  // The machine's attest epoch (docs/storage.md): raised by each reset and
  // EK replacement; what is recorded in an epoch stops counting after it.
  int64_t attest_epoch = 0;
};

// A machine's trust (Machine::trust); the database stores these texts.
inline constexpr std::string_view kTrustTrusted = "trusted";
inline constexpr std::string_view kTrustUntrusted = "untrusted";
// Machine::trust_reason prefixes and values.
inline constexpr std::string_view kTrustReasonFailedPrefix = "attestation_failed:";
inline constexpr std::string_view kTrustReasonTooOld = "attestation_too_old";

// The last provisioning report a machine's agent sent (POST
// /v1/machine/report; docs/trust.md): one per machine, replaced by the next.
// Not a state change, so no audit row. Sizes are bounded by storage (fields
// longer than the wire allows are refused as field_invalid).
struct ProvisioningReportRecord {
  int64_t machine_id = 0;
  std::string hostname;  // filled by reads; ignored on writes
  int64_t at = 0;
  std::string outcome;  // "ok" or "failed"
  std::string step;
  std::string reason;
  std::string message;
  int exit_status = 0;
  std::vector<std::string> done;
};

// A pool's boot policy modes (pools.boot_policy_mode).
inline constexpr char kPolicyModeEnforce[] = "enforce";
inline constexpr char kPolicyModeObserve[] = "observe";

// A change of a pool's boot policy and/or mode (`rackgatectl policy accept`,
// `policy put`, `policy observe`, `policy enforce`): one transaction, one
// audit row (action "pool_policy").
struct PoolPolicyChange {
  std::string pool;
  // Set: the new policy text (nullopt inside: no policy). Unset: kept.
  std::optional<std::optional<std::string>> boot_policy_json;
  std::optional<std::string> mode;  // kPolicyMode*; unset: kept
  // What the audit row says beyond pool, modes and policy digests: the
  // caller's JSON object (e.g. {"source": "proposal", "diff": [...]}); at
  // most kMaxJson bytes.
  std::string audit_detail_json = "{}";
};

// One machine's latest measured boot as an observing pool saw it
// (docs/policy.md, "Observe"): what `policy propose` reads. One per
// machine, replaced by the next; deleted with the machine. Not a state
// change: no audit row.
struct BootObservation {
  int64_t machine_id = 0;
  std::string hostname;          // filled by reads; ignored on writes
  std::string pool;              // the machine's pool when observed
  std::string tpm_manufacturer;  // filled by reads (the machine's EK facts)
  std::string tpm_model;         // filled by reads
  int64_t at = 0;
  Bytes event_log;               // as the machine sent it; may be empty
  std::string pcrs_json;         // the verified quote's PCR values, {"pcrs": {...}}
  // The pool's policy at the time: "pass", "fail" or "none" (no policy),
  // and for "fail" each rule:reason broken.
  std::string verdict = "none";
  std::vector<std::string> violations;
};

// A challenge in flight (docs/protocol.md). Holds the activation secret's
// HASH only, never the secret.
struct Session {
  std::string id;  // random, chosen by the caller; 1..128 chars
  int64_t machine_id = 0;
  Bytes nonce;
  Bytes secret_hash;
  Bytes ak_public;  // TPM2B_PUBLIC
  Bytes ak_name;
  std::string pcr_selection;
  int64_t created_at = 0;
  int64_t expires_at = 0;
  std::optional<int64_t> used_at;  // set by ConsumeSession
};

// A bearer token, by its hash (the raw token is never stored).
struct Token {
  Bytes hash;
  int64_t machine_id = 0;
  std::string session_id;  // the session it was issued for (informational)
  int64_t issued_at = 0;
  int64_t expires_at = 0;
  // The session's nonce and AK (TPM2B_PUBLIC): a TPM2_Certify made after the
  // attestation is checked against them. Empty for tokens issued before v3.
  Bytes nonce;
  Bytes ak_public;
  // renew: when the nonce served as a TPM2_Certify's qualifying data for a
  // CSR (ConsumeCertifyNonce); nullopt while unused.
  std::optional<int64_t> certify_nonce_used_at;
};

// What a bearer token resolves to.
struct Bearer {
  Machine machine;
  Token token;
  Pool pool;  // the machine's pool, read in the same snapshot
};

// A provisioning token of a pool, by its hash. expires_at nullopt: the
// current token; set: the previous one, valid until then.
struct PoolToken {
  Bytes hash;
  std::string pool;
  int64_t created_at = 0;
  std::optional<int64_t> expires_at;
};

inline constexpr std::string_view kTemplatePublic = "public";
inline constexpr std::string_view kTemplateAttested = "attested";

// A template that PutPool sets (or, with nullopt, removes) in the pool's own
// transaction: `which` is kTemplatePublic or kTemplateAttested; `digest` is
// the caller's SHA-256 hex of the text, for the audit row.
struct PoolTemplateChange {
  std::string which;
  std::optional<std::string> template_json;
  std::string digest;
};

// What one PutPool did: whether it created the pool, and whether it stored
// the first token hash it was given (the caller shows that token only then).
struct PoolPutOutcome {
  bool created = false;
  bool token_created = false;
};

inline constexpr std::string_view kCertClient = "client";
inline constexpr std::string_view kCertServing = "serving";

// A certificate signed for a machine (its content is not stored: serial,
// names and the key's hash are what an operator looks for).
struct IssuedCertificate {
  std::string serial;  // lower-case hex
  int64_t machine_id = 0;
  std::string hostname;  // filled by storage from the machine
  std::string kind;      // kCertClient or kCertServing
  std::string subject;
  std::vector<std::string> sans;
  Bytes public_key_sha256;
  bool tpm_resident = false;
  int64_t not_before = 0;
  int64_t not_after = 0;
  int64_t issued_at = 0;
  // The certificate itself (public): a client whose answer was lost (a crash,
  // a cut connection) asks again with the same key and gets the same
  // certificate instead of a refusal.
  std::string certificate_pem;
  // renew (docs/csr.md, "Renewal"): the serial of the certificate that
  // renewed this one (nullopt: not renewed), and, filled by GetCertificate
  // only, whether it was signed since the machine's last reset or EK
  // replacement (a certificate from before is never renewed).
  std::optional<std::string> replaced_by;
  bool since_reset = false;
};

// What core::CsrService records once its issuer (core/issuer.h) returned a
// certificate: the certificate, and, when they apply, the renewal it makes
// and the certify nonce it consumes (CsrStore::RecordIssuedCertificate).
struct IssuedCertificateRecord {
  IssuedCertificate certificate;
  // A renewal: the serial of the certificate this one replaces.
  std::optional<std::string> replaces;
  // A TPM-resident key proven by a TPM2_Certify over this token's session
  // nonce: the nonce is consumed (one nonce, one use).
  std::optional<Bytes> certify_token_hash;
};

inline constexpr std::string_view kVerdictOk = "ok";
inline constexpr std::string_view kVerdictRefused = "refused";

struct AttestationRecord {
  int64_t id = 0;           // set by storage
  int64_t machine_id = 0;
  std::string hostname;     // filled by reads; ignored on writes
  std::string session_id;
  int64_t at = 0;
  std::string verdict;      // kVerdictOk or kVerdictRefused
  std::string reason;       // "" for ok; the refusal's reason code otherwise
  std::vector<std::string> reasons;  // every reason (e.g. each policy violation)
  std::string pcrs_json;    // opaque; may be "" when the quote never verified
  uint32_t reset_count = 0;
  uint32_t restart_count = 0;
  uint64_t clock = 0;
  uint64_t firmware_version = 0;
};

// What judging evidence reads, in one snapshot (AttestationStore::ReadEvidence;
// docs/storage.md, "Statements and writes per machine").
struct EvidenceInputs {
  Session session;
  Machine machine;
  std::optional<AttestationRecord> last;  // LastSuccessfulAttestation; none yet
  Pool pool;                              // the machine's pool
};

// What answering a challenge reads, in one snapshot
// (AttestationStore::ReadChallenge).
struct ChallengeInputs {
  Machine machine;
  Pool pool;  // the machine's pool
};

struct AuditEntry {
  int64_t id = 0;
  int64_t at = 0;
  std::string actor;
  std::string action;  // e.g. enroll, enroll_update, replace_ek, approve, revoke,
                       // reset, attest, pool_put, import, or a Transition's action
  std::optional<int64_t> machine_id;
  std::string hostname;  // "" when the action concerns no machine
  std::optional<std::string> from_state;  // StateName()s, as stored
  std::optional<std::string> to_state;
  std::string why;
  std::string detail_json;  // a JSON object; never contains secrets
  // The hash chain (docs/audit.md): the previous row's hash (the genesis for
  // the first row) and this row's, both 64 lower-case hex characters.
  std::string prev_hash;
  std::string hash;
};

// A row's hash kept outside the appliance (docs/audit.md, "Anchoring the
// head"): the only thing that shows the newest rows were cut off.
struct AuditAnchor {
  int64_t id = 0;
  std::string hash;
};

// The audit chain's verdict (docs/audit.md, "Verifying"). `intact` false
// names the first row that breaks it; rows counts the rows checked before it.
struct AuditChainReport {
  int64_t rows = 0;
  int64_t head_id = 0;    // the newest row checked; 0 for an empty log
  std::string head_hash;  // its hash; the genesis for an empty log
  bool intact = true;
  int64_t bad_row_id = 0;
  // hash_mismatch (the row was edited), prev_mismatch (a row before it was
  // deleted, inserted or re-hashed), row_missing (ids jump: rows deleted),
  // unchained (a row without a hash: written outside rackgate),
  // anchor_mismatch (the anchored row's hash differs: rewritten),
  // anchor_missing (the anchored row is gone: the newest rows were cut off).
  std::string problem;
  std::string message;    // for the operator: which row, what is wrong
};

struct MachineFilter {
  std::optional<std::string> pool;
  std::optional<MachineState> state;
};

struct AuditFilter {
  std::optional<std::string> hostname;
  // 0: the newest `limit` entries. N > 0: the first `limit` entries with
  // id > N (follow the log). Either way returned in ascending id order.
  int64_t since_id = 0;
  int limit = 100;  // clamped to [1, 10000]
};

struct PurgeCounts {
  int64_t sessions = 0;
  int64_t tokens = 0;
};

struct StoreOptions {
  // How long a write waits for another process's lock before db_busy.
  int busy_timeout_ms = 5000;
  // Read connections are opened on demand, up to max_readers at once (a
  // read then waits for one, up to busy_timeout_ms, before db_busy): the
  // pool is bounded, which matters where every connection is a server
  // process (PostgreSQL). Of those released, up to max_idle_readers stay
  // open for the next read; unset is max_readers on every backend (a new
  // connection prepares every statement again; on PostgreSQL it is a forked
  // server process that loads its catalog: closing the ninth of ten busy
  // readers made a storm open 614 connections for 400 machines; on SQLite
  // it parses the schema: 6% of rackgated's CPU). A reader left idle for
  // reader_idle_ms is closed, so a burst's connections do not stay.
  std::optional<int> max_idle_readers;
  int max_readers = 32;
  int reader_idle_ms = 60000;
  // Failed attestation rows kept per machine (oldest dropped), so a client that
  // knows an enrolled EK public key cannot grow the database without bound.
  int max_failures_per_machine = 100;
};

// --- Webhook events (docs/events.md) ----------------------------------------
// An event is written by the database's triggers in the transaction of the
// change it reports (storage/schema.cc, kV6Events); storage only reads them
// and keeps each delivery's state.

// One webhook's delivery of one event.
struct EventDelivery {
  std::string webhook;  // the webhook's URL
  int64_t attempts = 0;
  int64_t next_attempt_at = 0;
  std::optional<int64_t> delivered_at;
  std::string last_error;  // the last failed attempt's cause; "" when none
};

struct Event {
  int64_t id = 0;
  int64_t at = 0;
  std::string type;  // attestation_failed, machine_untrusted, ... (docs/events.md)
  std::optional<int64_t> machine_id;
  std::string hostname;
  std::string pool;
  std::string actor;
  std::string why;
  std::string detail_json = "{}";  // a JSON object; never a secret
  std::vector<EventDelivery> deliveries;  // by webhook URL (ListEvents only)
};

// A configured webhook as storage knows it: no secret, ever.
struct WebhookTarget {
  std::string url;
  std::vector<std::string> events;  // the types it takes; empty: every type
};

// A delivery that is due, with its event (whose `deliveries` is empty).
struct DueDelivery {
  Event event;
  EventDelivery delivery;
};

struct EventFilter {
  bool pending_only = false;  // only events with an undelivered delivery
  int limit = 100;            // the newest `limit`, clamped to [1, 10000]
};

// --- Manual CSR approval (docs/csr.md, "Manual approval") ---------------------

// A CSR request's state; the database stores these texts.
inline constexpr std::string_view kCsrWaiting = "waiting";
inline constexpr std::string_view kCsrApproved = "approved";
inline constexpr std::string_view kCsrDenied = "denied";

// A CSR that passed every rule and waits for an operator (or was decided).
// Identified for the machine by (kind, public key) within its attest epoch:
// a reset or a new EK starts over.
struct CsrApprovalRequest {
  int64_t id = 0;  // set by storage
  int64_t machine_id = 0;
  std::string hostname;  // filled by reads; ignored on writes
  std::string kind;      // kCertClient or kCertServing
  Bytes public_key_sha256;
  std::string csr_pem;  // public: the request as the machine sent it
  std::vector<std::string> usages;
  bool tpm_resident = false;
  std::string state;        // kCsrWaiting, kCsrApproved or kCsrDenied; set by storage
  std::string deny_reason;  // the operator's reason when denied
  std::string decided_by;   // the operator's name once decided
  int64_t created_at = 0;   // set by storage
  std::optional<int64_t> decided_at;
  bool current = true;  // filled by reads: false once its machine was reset or re-keyed
};

// --- Approver mode (docs/kubernetes.md) --------------------------------------

// A key a machine proved to rackgate through an attested session (POST
// /v1/machine/kubelet-key: the CSR's self-signature under the session's
// token, or a TPM2_Certify by the AK), for the kubelet to put in the
// certificates.k8s.io CSR that the cluster's own signer issues. Belongs to
// the machine's attest epoch: a reset or a new EK makes it stale.
struct AttestedKey {
  int64_t machine_id = 0;
  std::string hostname;  // filled by reads; ignored on writes
  std::string kind;      // kCertClient or kCertServing
  Bytes public_key_sha256;
  bool tpm_resident = false;
  int64_t registered_at = 0;  // set by storage
  std::string used_by_uid;    // the API CSR approved with this key; "" while unused
  bool current = true;        // filled by reads: false once its machine was reset or re-keyed
};

// One attestation registers at most this many keys of each kind (client,
// serving): the kubelet's key, and one more for an agent that lost its
// answer and made a new key. Counted in the machine's current epoch since its
// latest good attestation (Machine::last_attested_at); more is refused
// kubelet_key_limit until the machine attests again, so a token cannot grow
// the store or the audit log (docs/csr.md).
inline constexpr int kMaxKeysPerKindPerAttestation = 2;

// What a Kubernetes CSR asks for (KubeCsrDecision::purpose); the database
// stores these texts.
inline constexpr std::string_view kKubePurposeJoin = "join";          // a new node's client certificate
inline constexpr std::string_view kKubePurposeRotation = "rotation";  // the kubelet rotates its client certificate
inline constexpr std::string_view kKubePurposeServing = "serving";    // the kubelet's serving certificate
// The reason of a waiting kubelet CSR denied by its machine's reset or new
// EK (DenyWaitingKubeCsrs), and of an approved rotation or serving CSR
// refused because the machine has not joined in its current epoch.
inline constexpr std::string_view kKubeReasonMachineReset = "machine_reset";
inline constexpr std::string_view kKubeReasonNotJoined = "machine_not_joined";

// A certificates.k8s.io/v1 CSR that rackgate decided, or holds for an
// operator (decision kCsrWaiting), identified by the API object's uid.
struct KubeCsrDecision {
  std::string uid;   // metadata.uid
  std::string name;  // metadata.name
  int64_t machine_id = 0;
  std::string hostname;  // filled by reads; ignored on writes
  std::string kind;      // kCertClient or kCertServing
  std::string purpose;   // kKubePurposeJoin, kKubePurposeRotation or kKubePurposeServing
  Bytes public_key_sha256;
  std::string requester;  // spec.username, as the API server authenticated it (printable, <= 256)
  std::string decision;   // kCsrWaiting, kCsrApproved or kCsrDenied
  std::string reason;     // rackgate's reason code ("" while waiting)
  std::string message;    // what to fix (printable, <= 512); never a secret
  std::string decided_by; // "rackgate" or the operator's name
  int64_t created_at = 0;  // set by storage
  std::optional<int64_t> decided_at;
};

// Bounds on waiting requests, so a flood of CSRs cannot fill the store.
struct CsrQueueLimits {
  int max_waiting_per_machine = 4;
  int max_waiting = 1000;
};

// What an operator sets on a pending machine as it is approved (discovery):
// each field, when given, replaces the machine's.
struct ApprovalChanges {
  std::optional<std::string> hostname;
  std::optional<std::string> pool;
  std::optional<std::vector<Address>> addresses;
  std::optional<std::string> vars_json;  // a JSON object, opaque here
};

// --- Enroll that keeps what it is not told to change; imports ---------------
// (docs/inventory.md)

// What one enrollment did: kEnrollCreated, kEnrollUpdated, kEnrollUnchanged
// or kEnrollReplacedEk, and the changes in words (MergedEnrollment::changes);
// empty unless updated or replaced.
inline constexpr std::string_view kEnrollCreated = "created";
inline constexpr std::string_view kEnrollUpdated = "updated";
inline constexpr std::string_view kEnrollUnchanged = "unchanged";
inline constexpr std::string_view kEnrollReplacedEk = "replaced_ek";
struct EnrollOutcome {
  Machine machine;
  std::string outcome;
  std::vector<std::string> changes;
};

// The machine an enrollment makes of the one stored under its hostname, as
// the caller's merge (EnrollMerge) decides it: the enrollment to store, and
// against the stored machine the changes in words ("pool a -> b",
// "addresses +InternalIP=10.0.0.6", "vars +rack ~role -old", "policy set",
// "state pending -> enrolled", ...) and the changed fields' names (the audit
// row's detail). Both lists are empty for a new machine and when nothing
// changed.
struct MergedEnrollment {
  Enrollment enrollment;
  std::vector<std::string> changes;
  std::vector<std::string> changed;
};

// The merge of EnrollMerged and Import (core/enrollment_merge.h): called
// inside the store's write transaction, once per enrollment (`row`: the
// import row's index, 0 for EnrollMerged), with the machine stored under the
// enrollment's hostname (nullptr when none) and the state the store's rules
// give it (pending -> enrolled when enrolled as enrolled, else kept; an EK
// replacement's as stored). BORROWED: `stored` lives for the call. Its
// failure is the store's answer, and nothing is stored. The store keeps the
// enrollment's hostname, EK and state; the rest is the merge's.
using EnrollMerge = std::function<Result<MergedEnrollment>(size_t row, const Machine* stored, MachineState state)>;

// One row of an inventory: the enrollment as given (the merge resolves it)
// and where it came from ("line 12", "row 3 (line 17)"), which every refusal
// names.
struct ImportRow {
  Enrollment enrollment;
  std::string where;
};

struct ImportOptions {
  // Check every row against the store and report what would be done, in the
  // same transaction as a real import, which is then rolled back.
  bool dry_run = false;
};

struct ImportRowOutcome {
  std::string where;
  std::string hostname;
  std::string outcome;  // kEnrollCreated, kEnrollUpdated or kEnrollUnchanged
  std::vector<std::string> changes;
};

struct ImportReport {
  bool dry_run = false;
  size_t created = 0;
  size_t updated = 0;
  size_t unchanged = 0;
  std::vector<ImportRowOutcome> rows;  // in the inventory's order
};

// --- Appliance CA rotation (docs/operations.md, "Rotating the appliance CA") --
// One fleet-wide record while a rotation runs; none before prepare and after
// retire. Certificates only, as PEM: never a key.

inline constexpr std::string_view kCaKindAppliance = "appliance";
inline constexpr std::string_view kCaStagePrepared = "prepared";
inline constexpr std::string_view kCaStageSwitched = "switched";

struct CaRotation {
  std::string kind = std::string(kCaKindAppliance);
  std::string stage;        // kCaStagePrepared or kCaStageSwitched
  std::string current_pem;  // the CA in force when prepared (one certificate)
  std::string current_sha256;
  std::string next_pem;     // the CA prepared to replace it (one certificate)
  std::string next_sha256;
  int64_t prepared_at = 0;
  std::optional<int64_t> switched_at;  // the first appliance's switch
  bool operator==(const CaRotation&) const = default;
};

// (done, total), called after each row has been checked and written, inside
// the transaction; done == total means every row is in and commit follows.
using ImportProgress = std::function<void(size_t done, size_t total)>;

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_TYPES_H_
