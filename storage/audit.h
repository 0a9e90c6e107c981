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

#include "storage/rows.h"
#include "storage/sqlite.h"
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

// Inserts the row on `c`, inside the caller's write transaction. Never put a
// secret in `detail`: the audit log is read by operators and kept forever.
void WriteAudit(Connection& c, const Actor& actor, int64_t now, const AuditRow& row);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_AUDIT_H_
