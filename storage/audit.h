// The audit log's rows: one per state change and operator action, written in
// the transaction of the change (docs/storage.md, "The audit log").
#ifndef RACKGATE_STORAGE_AUDIT_H_
#define RACKGATE_STORAGE_AUDIT_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/audit.h is internal to storage/; include storage/store.h"
#endif

#include <cstdint>
#include <optional>
#include <string>

#include "storage/audit_detail.h"
#include "storage/rows.h"
#include "storage/sql.h"
#include "storage/types.h"

namespace rackgate::storage {

// The actor of audit rows the protocol writes (the machine proved itself; the
// daemon recorded it).
inline constexpr char kAttestationActor[] = "attestation";

struct AuditRow {
  std::string action;
  const Machine* machine = nullptr;  // BORROWED; null when no machine is concerned
  std::optional<MachineState> from_state;
  std::optional<MachineState> to_state;
  json detail = json::object();
};

// `detail` as the JSON object AuditRow holds (storage/audit_detail.h).
json DetailJson(const AuditDetail& detail);

// Inserts the row on `c`, inside the caller's write transaction, chained to
// the newest row (docs/audit.md): its id is the newest id + 1, its prev_hash
// that row's hash. Never put a secret in `detail`: the audit log is read by
// operators and kept forever.
void WriteAudit(Connection& c, const Actor& actor, int64_t now, const AuditRow& row);

// --- The hash chain (docs/audit.md, "The hash chain") -------------------------
// The format is shared by the writer (WriteAudit), the migration that chains
// rows written before it (BackfillAuditChain) and the verifier; change it only
// with a new domain string and a migration.

// What the first row chains to: 64 zeros.
inline constexpr char kAuditGenesis[] = "0000000000000000000000000000000000000000000000000000000000000000";
// Prefixed to every row's encoding, so the hash can never be mistaken for
// one of another format.
inline constexpr char kAuditHashDomain[] = "rackgate audit v1";

// The row's canonical encoding: the domain, a NUL byte, then each of
// prev_hash, id, at, actor, action, machine_id, hostname, from_state,
// to_state, why, detail_json as 0x00 when NULL, or 0x01, its length as 4
// bytes big-endian, its bytes (integers as decimal ASCII). Never e.hash.
std::string AuditRowEncoding(const AuditEntry& e);
// SHA-256 of AuditRowEncoding(e), lower-case hex.
std::string AuditRowHash(const AuditEntry& e);
// Walks the rows `s` yields (every column, ORDER BY id) and judges the
// chain, and the anchor when given; stops at the first break.
AuditChainReport WalkAuditChain(Stmt& s, const std::optional<AuditAnchor>& anchor);
// Migration: gives every row written before the chain existed its prev_hash
// and hash, in id order, inside the migration's transaction (it lifts the
// append-only trigger for exactly that and puts it back).
void BackfillAuditChain(Connection* c);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_AUDIT_H_
