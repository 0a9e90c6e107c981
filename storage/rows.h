// Row mappers: typed values to and from the schema's columns (storage/schema.cc),
// and the lookups that every concern shares. Failures throw StoreError.
#ifndef RACKGATE_STORAGE_ROWS_H_
#define RACKGATE_STORAGE_ROWS_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/rows.h is internal to storage/; include storage/store.h"
#endif

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "storage/sql.h"
#include "storage/types.h"

namespace rackgate::storage {

using json = nlohmann::json;

// Compact JSON; invalid UTF-8 is replaced rather than thrown on.
std::string Dump(const json& j);
// A stored JSON list of strings (written by storage); anything else reads
// as empty.
std::vector<std::string> StringList(const std::string& json_text);
// An audit row's detail as the caller gave it (a core service's compact
// JSON object text), to which storage adds its own fields. Storage reads
// no other JSON than its own columns and this (docs/storage.md). Throws
// field_invalid (kInvalidArgument) naming `what` when the text is not a
// JSON object of 2 .. `max_bytes`.
json DetailObject(const char* what, const std::string& json_text, size_t max_bytes = 64 * 1024);

// --- machines and addresses ---------------------------------------------------

// "x, y" as "alias.x, alias.y": a table's column list in a join.
std::string Qualified(std::string_view alias, std::string_view columns);
// The statement text build(dialect) makes, built once per call site and
// dialect.
template <typename Build>
const std::string& PerDialect(const Connection& c, Build build) {
  static const std::string sqlite = build(Dialect::kSqlite);
  static const std::string postgres = build(Dialect::kPostgres);
  return c.dialect() == Dialect::kPostgres ? postgres : sqlite;
}

// The columns ReadMachine reads, in its order, for the connection's dialect,
// of the table aliased `m`: the machine's addresses and attest_epoch come in
// the same row (one statement per machine, not three: docs/performance.md,
// "Round trips per joined machine").
const std::string& MachineColumns(Dialect d);
inline constexpr int kMachineColumnCount = 22;
// SELECT MachineColumns FROM machines m; append a WHERE clause.
const std::string& MachineSelect(const Connection& c);
// From column `first` on. db_corrupt when the stored state is not a state
// name.
Machine ReadMachine(const Stmt& s, int first = 0);
// The machine, with its addresses, selected by MachineSelect + `where`.
std::optional<Machine> LoadMachine(Connection& c, const char* where, const std::function<void(Stmt&)>& bind);
std::optional<Machine> MachineById(Connection& c, int64_t id);
std::optional<Machine> MachineByHostname(Connection& c, const std::string& hostname);
std::optional<Machine> MachineByEkHash(Connection& c, const Bytes& ek_hash);
Machine MustMachineById(Connection& c, int64_t id);                           // machine_unknown
Machine MustMachineByHostname(Connection& c, const std::string& hostname);  // hostname_unknown
// "'node-1' is joined": how a state_conflict message starts.
std::string MachineIs(const Machine& m);
void ReplaceAddresses(Connection& c, int64_t machine_id, const std::vector<Address>& addresses);
// Open sessions and tokens die with an identity change (reset, new EK).
// Returns how many sessions and tokens were dropped.
std::pair<int64_t, int64_t> DropCredentials(Connection& c, int64_t machine_id);
// The machine's kubelet CSRs that wait for an operator (approver mode) are
// denied (reason kKubeReasonMachineReset, decided by `by`) with an identity
// change too: a CSR of an earlier epoch is never approved
// (kube_approvals.cc). Returns how many.
int64_t DenyWaitingKubeCsrs(Connection& c, int64_t machine_id, const std::string& by, int64_t now);

// --- sessions (sessions.cc) -------------------------------------------------------

// The columns ReadSessionRow reads, in its order.
inline constexpr char kSessionColumns[] =
    "id, machine_id, nonce, secret_hash, ak_public, ak_name, pcr_selection, created_at, expires_at, used_at";
inline constexpr int kSessionColumnCount = 10;
// From column `first` on.
Session ReadSessionRow(const Stmt& s, int first = 0);

// session_unknown.
Session ReadSession(Connection& c, const std::string& id);
// session_used, session_expired (now >= expires_at).
void CheckSessionUsable(const Session& session, int64_t now);
// Reads the session, checks it and marks it used at `now`, inside the
// caller's write transaction.
Session ConsumeSessionIn(Connection& c, const std::string& id, int64_t now);
// Marks the token's session nonce used as a TPM2_Certify's qualifying data,
// inside the caller's write transaction: certify_nonce_used when it already
// was, token_unknown.
void ConsumeCertifyNonceIn(Connection& c, const Bytes& token_hash, int64_t now);

// --- pools ----------------------------------------------------------------------

inline constexpr char kPoolColumns[] =
    "name, settings_json, boot_policy_json, created_at, updated_at, token_required, public_template, "
    "attested_template, boot_policy_mode";
inline constexpr int kPoolColumnCount = 9;
// SELECT kPoolColumns FROM pools; append a WHERE or ORDER BY clause.
const std::string& PoolSelect();
// From column `first` on.
Pool ReadPool(const Stmt& s, int first = 0);
std::optional<Pool> LoadPool(Connection& c, const std::string& name);
Pool MustPool(Connection& c, const std::string& name);  // pool_unknown
bool PoolExists(Connection& c, const std::string& name);

// --- attestations and certificates ----------------------------------------------

// The columns ReadAttestation reads, of attestations `a` and its machine `m`.
inline constexpr char kAttestationColumns[] =
    "a.id, a.machine_id, m.hostname, a.session_id, a.at, a.verdict, a.reason, a.reasons_json, "
    "a.pcrs_json, a.reset_count, a.restart_count, a.clock, a.firmware_version";
inline constexpr char kAttestationFrom[] = " FROM attestations a JOIN machines m ON m.id = a.machine_id ";
// The id of machine `m`'s newest ok attestation of its current epoch: the
// TPM counters' baseline (LastSuccessfulAttestation); NULL when none.
inline constexpr char kBaselineAttestationId[] =
    "(SELECT la.id FROM attestations la WHERE la.machine_id = m.id AND la.verdict = 'ok' "
    "AND la.attest_epoch = m.attest_epoch ORDER BY la.id DESC LIMIT 1)";
// From column `first` on.
AttestationRecord ReadAttestation(const Stmt& s, int first = 0);
// Inserts `r` with `verdict` in the machine's epoch; returns the row id.
int64_t InsertAttestation(Connection& c, const AttestationRecord& r, std::string_view verdict, int64_t epoch);

inline constexpr char kCertificateSelect[] =
    "SELECT serial, machine_id, hostname, kind, subject, sans_json, public_key_sha256, tpm_resident, "
    "not_before, not_after, issued_at, certificate_pem, replaced_by FROM certificates ";
IssuedCertificate ReadCertificate(const Stmt& s);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_ROWS_H_
