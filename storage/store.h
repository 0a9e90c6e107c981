// The appliance's enrollment store: machines, pools, attestation sessions,
// bearer tokens and the audit log, in one SQLite database (docs/storage.md).
//
// Contract, for every method:
//  - Failures come back as Status/Result with a stable reason (below); nothing
//    throws across this boundary except std::bad_alloc.
//  - Time is unix seconds, passed in by the caller (`now`), so tests control
//    it. "Expired" means now >= expires_at.
//  - Every state change and every operator action is ONE transaction together
//    with exactly one audit row. A refused operation changes nothing.
//  - Hashes (EK hash, token hash, activation secret hash) are computed by the
//    caller and passed in as bytes; raw tokens and secrets never reach storage.
//  - JSON texts (pool settings, boot policies, PCR values) are opaque here: the
//    daemon owns their meaning. Storage never parses them.
//
// Reasons (Status::reason()), by Status code:
//  kInvalidArgument  hostname_invalid, pool_invalid, state_invalid, field_invalid,
//                    ek_conflict (hostname enrolled with another EK),
//                    ek_in_use (EK enrolled under another hostname),
//                    state_conflict (current state does not allow the change),
//                    client_cert_already_issued
//  kNotFound         hostname_unknown, machine_unknown, pool_unknown,
//                    session_unknown, token_unknown, attestation_unknown
//  kVerificationFailed  session_used, session_expired, token_expired, token_revoked
//  kUnsupported      db_newer_than_code (the file was written by a newer rackgate),
//                    db_not_rackgate (an SQLite file of something else)
//  kCorruption       db_corrupt (a stored row breaks an invariant)
//  kIoError          db_busy (the lock was not granted within busy_timeout),
//                    db_error (any other SQLite failure; the SQLite message is
//                    in Status::message() only, for the operator's log)
//
// Thread safety: a Store is safe to use from any number of threads at once.
// Design: one writer connection behind a mutex (every write transaction runs
// under it, BEGIN IMMEDIATE, so threads of this process never see SQLITE_BUSY
// from each other and a check-then-change is atomic), plus a pool of read-only
// connections handed out one per call (WAL lets readers run concurrently with
// the writer, each on a consistent snapshot). SQLITE_BUSY can then come only
// from another process holding the lock (e.g. `sqlite3 .backup`), and is
// waited out for busy_timeout before db_busy is returned.
#ifndef RACKGATE_STORAGE_STORE_H_
#define RACKGATE_STORAGE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace rackgate::storage {

using Bytes = std::vector<uint8_t>;

// Machine states (docs/storage.md, DESIGN.md "A machine's life").
inline constexpr std::string_view kStatePending = "pending";
inline constexpr std::string_view kStateEnrolled = "enrolled";
inline constexpr std::string_view kStateAttested = "attested";
inline constexpr std::string_view kStateProvisioned = "provisioned";
inline constexpr std::string_view kStateJoined = "joined";
inline constexpr std::string_view kStateRevoked = "revoked";
bool IsValidState(std::string_view state);

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
  std::string state = std::string(kStateEnrolled);  // "enrolled" or "pending"
  // Operator-set values for template rendering: a JSON object, opaque here.
  std::string vars_json = "{}";
};

struct Machine {
  int64_t id = 0;
  std::string hostname;
  std::string pool;
  std::string state;
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
};

// What a bearer token resolves to.
struct Bearer {
  Machine machine;
  Token token;
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

struct AuditEntry {
  int64_t id = 0;
  int64_t at = 0;
  std::string actor;
  std::string action;  // e.g. enroll, enroll_update, replace_ek, approve, revoke,
                       // reset, attest, pool_put, import, or a Transition's action
  std::optional<int64_t> machine_id;
  std::string hostname;  // "" when the action concerns no machine
  std::optional<std::string> from_state;
  std::optional<std::string> to_state;
  std::string why;
  std::string detail_json;  // a JSON object; never contains secrets
};

struct MachineFilter {
  std::optional<std::string> pool;
  std::optional<std::string> state;
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
  // Idle read connections kept open; more are opened on demand.
  int max_idle_readers = 8;
  // Failed attestation rows kept per machine (oldest dropped), so a client that
  // knows an enrolled EK public key cannot grow the database without bound.
  int max_failures_per_machine = 100;
};

// (done, total), called after each row has been checked and written, inside
// the transaction; done == total means every row is in and commit follows.
using ImportProgress = std::function<void(size_t done, size_t total)>;

class Store {
 public:
  // The schema version this code writes.
  static int CurrentSchemaVersion();

  // Opens (creating when absent, file mode 0600) and migrates the database at
  // `path`. Fails with db_newer_than_code when the file's schema version is
  // newer than this code's, db_error/db_busy when SQLite fails. The caller
  // owns the returned Store.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const StoreOptions& options = {});

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // --- Pools -----------------------------------------------------------------
  // Creates or replaces the pool's settings and boot policy (audited as
  // pool_put; the audit row names the pool, never the settings' content).
  // `first_token_hash`, when given, becomes the pool's current provisioning
  // token if it has none (a new pool gets its first token in the same
  // transaction). token_required and templates of an existing pool: PutPool
  // writes token_required as given and keeps the templates.
  Result<Pool> PutPool(const Pool& pool, const Actor& actor, int64_t now,
                       const std::optional<Bytes>& first_token_hash = std::nullopt);
  Result<Pool> GetPool(const std::string& name);  // pool_unknown
  Result<std::vector<Pool>> ListPools();
  // Sets (or, with nullopt, removes) the pool's kTemplatePublic or
  // kTemplateAttested template. Audited as pool_template_put with the
  // caller's digest of the text, never the text. field_invalid for another
  // `which`; pool_unknown.
  Result<Pool> SetPoolTemplate(const std::string& pool, std::string_view which,
                               const std::optional<std::string>& template_json, const std::string& digest,
                               const Actor& actor, int64_t now);
  // Makes `new_hash` the pool's current provisioning token. The current one
  // becomes the previous one, valid until `previous_valid_until` (dropped at
  // once when that is <= now); an older previous token is dropped. Audited
  // as token_rotate. pool_unknown; field_invalid when the hash is taken.
  Status RotatePoolToken(const std::string& pool, const Bytes& new_hash, int64_t previous_valid_until,
                         const Actor& actor, int64_t now);
  // The pool's tokens still valid at `now`: the current one first.
  Result<std::vector<PoolToken>> ValidPoolTokens(const std::string& pool, int64_t now);
  // GetPool and ValidPoolTokens in one read (one snapshot): what serving
  // /config/{pool} needs per request.
  Result<std::pair<Pool, std::vector<PoolToken>>> GetPoolWithTokens(const std::string& name, int64_t now);

  // --- Enrollment ------------------------------------------------------------
  // Enrolls a machine; the EK is its identity and is immutable:
  //  - new hostname, new EK: inserted in e.state (enrolled or pending), audited
  //    as enroll.
  //  - EK enrolled under another hostname: ek_in_use.
  //  - hostname enrolled with another EK: ek_conflict, unless replace_ek; the
  //    replacement (audited as replace_ek with old and new EK hash) also puts
  //    the machine in e.state, clears TOFU values and the client-certificate
  //    mark, and drops its open sessions and tokens: a new TPM starts over.
  //  - same hostname, same EK: the enrollment is the desired record. Pool,
  //    addresses and policy are set to e's; the EK certificate and its facts
  //    only when e carries a certificate. A pending machine enrolled as
  //    enrolled moves to enrolled. Any other state is kept (a revoked machine
  //    stays revoked: Reset is the explicit way back). Audited as
  //    enroll_update only when something changed; otherwise a no-op.
  // Also pool_unknown, hostname_invalid, state_invalid, field_invalid.
  Result<Machine> Enroll(const Enrollment& e, const Actor& actor, bool replace_ek, int64_t now);

  // Enrolls every row, with Enroll's rules (replace_ek false), in ONE
  // transaction: all or nothing. A failure keeps the row's reason and names it
  // in the message ("row 12 (node-12): ..."); rows are counted from 0.
  // Returns the number of rows. One audit row per changed machine plus one
  // import row with the total. An exception thrown by `progress` rolls the
  // import back and propagates.
  Result<size_t> Import(const std::vector<Enrollment>& rows, const Actor& actor, int64_t now,
                        const ImportProgress& progress = nullptr);

  // --- Machines --------------------------------------------------------------
  Result<Machine> FindMachineByEkHash(const Bytes& ek_hash);  // machine_unknown (kNotFound)
  Result<Machine> GetMachine(const std::string& hostname);   // hostname_unknown
  Result<Machine> GetMachineById(int64_t id);                // machine_unknown
  Result<std::vector<Machine>> ListMachines(const MachineFilter& filter = {});

  // pending -> enrolled (audited as approve).
  Result<Machine> Approve(const std::string& hostname, const Actor& actor, int64_t now);
  // any -> revoked (audited as revoke); revoked already: a no-op. Its tokens
  // stop resolving at once (token_revoked).
  Result<Machine> Revoke(const std::string& hostname, const Actor& actor, int64_t now);
  // attested/provisioned/joined/revoked -> enrolled (audited as reset): clears
  // the TOFU values and the client-certificate mark, drops open sessions and
  // tokens, so the machine must attest again and may join once more.
  Result<Machine> Reset(const std::string& hostname, const Actor& actor, int64_t now);
  // Moves the machine to `to` when its current state is one of `from`, checked
  // in the same transaction as the change (state_conflict otherwise, and
  // nothing changes). Audited under `action`. When the machine is already in
  // `to` and `to` is in `from`, it is a no-op (no audit row).
  Result<Machine> Transition(int64_t machine_id, const std::vector<std::string>& from, const std::string& to,
                             const Actor& actor, const std::string& action, int64_t now);

  // --- Sessions and tokens ---------------------------------------------------
  // field_invalid when the id is empty, not printable ASCII or taken;
  // machine_unknown. The machine's state is the caller's to check (and
  // RecordAttestationSuccess refuses pending and revoked machines).
  Status CreateSession(const Session& session);
  // Single use: atomically marks the session used and returns it.
  // session_unknown, session_used, session_expired.
  Result<Session> ConsumeSession(const std::string& id, int64_t now);
  // The machine a token belongs to, and the token: token_unknown,
  // token_expired, and token_revoked when its machine is revoked.
  Result<Bearer> LookupToken(const Bytes& token_hash, int64_t now);
  // Deletes up to `batch` sessions and up to `batch` tokens with
  // expires_at <= now. Call repeatedly until both counts are below `batch`.
  Result<PurgeCounts> PurgeExpired(int64_t now, int batch = 1000);

  // --- Attestations ----------------------------------------------------------
  // One transaction: inserts the record (verdict ok), moves enrolled ->
  // attested (attested/provisioned/joined keep their state: a reboot
  // re-attests), sets last_attested_at, records the TOFU values when given,
  // inserts the token, and writes one audit row (attest). state_conflict when
  // the machine is pending or revoked. Returns the machine after the change.
  Result<Machine> RecordAttestationSuccess(const AttestationRecord& record, const Token& token,
                                           const std::optional<std::string>& tofu_pcrs_json);
  // Inserts a refused record (never changes state, no audit row: refusals are
  // in the attestations table, bounded per machine by
  // max_failures_per_machine). Failures for unknown EKs have no machine and
  // are not stored at all; the daemon logs them.
  Status RecordAttestationFailure(const AttestationRecord& record);
  // The newest ok record since the machine's EK was enrolled or replaced and
  // since its last Reset (attestation_unknown when none): the baseline for the
  // TPM's reset/restart counters and clock. Reset starts a new baseline, so an
  // operator can re-admit a machine whose TPM was cleared.
  Result<AttestationRecord> LastSuccessfulAttestation(int64_t machine_id);
  // The newest refused records over all machines, newest first.
  Result<std::vector<AttestationRecord>> RecentFailures(int limit = 50);

  // --- Config and certificates ---------------------------------------------
  // One audit row (config_served) per attested config served, with the
  // caller's digest of the bytes; attested -> provisioned on the first one,
  // later ones keep the state. state_conflict for pending, enrolled, revoked.
  Result<Machine> RecordConfigServed(int64_t machine_id, const std::string& digest, const std::string& version,
                                     const Actor& actor, int64_t now);
  // Records a signed certificate, in one transaction with its audit row
  // (certificate_issued). For kCertClient also sets the client-certificate
  // mark (client_cert_already_issued when set: only Reset clears it) and
  // moves attested/provisioned -> joined. For kCertServing the machine must
  // be provisioned or joined (state_conflict). field_invalid when the serial
  // is taken.
  Result<Machine> RecordCertificate(const IssuedCertificate& cert, const Actor& actor, int64_t now);
  // One audit row for a decision that changes no state (e.g. a refused CSR),
  // about `machine_id`. `detail_json` is a JSON object and never a secret.
  // machine_unknown.
  Status AuditMachineEvent(int64_t machine_id, const std::string& action, const std::string& detail_json,
                           const Actor& actor, int64_t now);
  // The client certificate issued to the machine since its last reset for
  // the key with this SHA-256, if any (certificate_unknown otherwise).
  Result<IssuedCertificate> FindClientCertificate(int64_t machine_id, const Bytes& public_key_sha256);
  // Newest first; hostname "" for every machine.
  Result<std::vector<IssuedCertificate>> ListCertificates(const std::string& hostname, int limit = 1000);

  // --- Audit and status ------------------------------------------------------
  Result<std::vector<AuditEntry>> ListAudit(const AuditFilter& filter = {});
  // Machines per state; every state is present (0 when none).
  Result<std::map<std::string, int64_t>> CountByState();
  // Sessions issued and neither used nor expired at `now` (a metric).
  Result<int64_t> CountOpenSessions(int64_t now);

  // Writes are committed in groups (docs/storage.md, "Group commit"): the
  // write transactions committed since Open, and the writes they carried.
  struct WriteStats {
    uint64_t commits = 0;
    uint64_t writes = 0;
  };
  WriteStats GetWriteStats() const;

  // A consistent copy of the live database at `dest_path` (VACUUM INTO),
  // while other threads keep working. Fails when dest_path exists.
  Status Backup(const std::string& dest_path);

 private:
  class Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_STORE_H_
