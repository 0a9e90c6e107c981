// The appliance's enrollment store: machines, pools, attestation sessions,
// bearer tokens and the audit log, behind one interface per role
// (storage/roles.h; docs/storage.md, "Roles") whose union is Store.
// The logic is written once over the SQL seam (storage/sql_store.h); SQLite
// is the embedded default and PostgreSQL serves several appliances. OpenStore
// picks the backend from a database string, so no caller names a backend.
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
//                    import_duplicate (a hostname or EK twice in an import),
//                    machine_active (delete/rename of a machine that must be
//                    revoked or reset first), hostname_taken,
//                    state_conflict (current state does not allow the change),
//                    client_cert_already_issued,
//                    kube_csr_decided (a Kubernetes CSR's uid already recorded)
//  kNotFound         hostname_unknown, machine_unknown, pool_unknown,
//                    session_unknown, token_unknown, attestation_unknown,
//                    certificate_unknown, report_unknown, key_unknown,
//                    kube_csr_unknown
//  kVerificationFailed  session_used, session_expired, token_expired, token_revoked,
//                    renewal_proof_invalid, certify_nonce_used,
//                    key_not_attested (an approved join's key)
//  kUnsupported      db_newer_than_code (the file was written by a newer rackgate),
//                    db_not_rackgate (an SQLite file of something else),
//                    db_backend_unsupported (OpenStore: a backend not built)
//  kCorruption       db_corrupt (a stored row breaks an invariant)
//  kIoError          db_busy (the lock was not granted within busy_timeout),
//                    db_error (any other SQLite failure; the SQLite message is
//                    in Status::message() only, for the operator's log)
//
// Thread safety: a Store is safe to use from any number of threads at once.
// The SQLite backend's design: one writer connection behind a mutex (every
// write transaction runs under it, BEGIN IMMEDIATE, so threads of this
// process never see SQLITE_BUSY from each other and a check-then-change is
// atomic), plus a pool of read-only
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
#include <utility>
#include <vector>

#include "base/status.h"
#include "storage/roles.h"
#include "storage/types.h"

namespace rackgate::storage {

// The whole store: the union of the roles of storage/roles.h, implemented
// by each backend. The daemon and rackgatectl hold one; a core service takes
// only the role(s) it calls.
class Store : public AttestationStore,
              public CsrStore,
              public KubeApprovalStore,
              public IgnitionStore,
              public PolicyStore,
              public TrustStore,
              public InventoryStore,
              public EventStore,
              public AuditStore,
              public CaRotationStore,
              public MaintenanceStore {
 public:
  // The schema version this code writes.
  static int CurrentSchemaVersion();

  // Opens (creating when absent, file mode 0600) and migrates the SQLite
  // database at `path`. Fails with db_newer_than_code when the file's schema
  // version is newer than this code's, db_error/db_busy when SQLite fails.
  // The caller owns the returned Store.
  static Result<std::unique_ptr<Store>> Open(const std::string& path, const StoreOptions& options = {});

  ~Store() override = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

 protected:
  Store() = default;
};

// Opens the store that `database` names:
//  - a file path, or "sqlite:PATH": the SQLite store at PATH (Store::Open);
//  - "postgresql://..." or "postgres://...": the PostgreSQL store at that
//    URI (docs/storage.md, "PostgreSQL"); db_unavailable when the server
//    cannot be reached. No message repeats the URI (it may hold a password).
// Anything Store::Open refuses is refused the same way. The caller owns the
// returned Store.
Result<std::unique_ptr<Store>> OpenStore(const std::string& database, const StoreOptions& options = {});

// True for the URIs OpenStore hands to PostgreSQL (postgresql://, postgres://).
bool IsPostgresUrl(std::string_view database);

// What a caller needs to know of a database string without naming a
// backend. IsServerDatabase: the string names a database server that
// several appliances may share (IsPostgresUrl today), so there is no file
// and no single process owns it. DatabaseFile: the file a file-backed
// store keeps (a path, or sqlite:PATH's PATH, which may be empty and is
// then refused by OpenStore); nullopt for a server.
bool IsServerDatabase(std::string_view database);
std::optional<std::string> DatabaseFile(std::string_view database);

// What logs, errors and command output say of a database string: a SQLite
// path as is; a URL (of any scheme, so a mistyped one too) with the password
// in its userinfo and every value of a query key that names a password
// (password, sslpassword, percent-encoded or not) shown as ***, and a
// fragment dropped: "postgresql://rackgate:***@10.0.0.5,10.0.0.6/rackgate?
// target_session_attrs=read-write". A secret never reaches a log or a
// terminal; the hosts and parameters an operator checks stay.
std::string RedactDatabase(const std::string& database);

// VerifyAuditChain on the SQLite file at `path`, opened read-only and never
// migrated, for when rackgated is down (`rackgatectl audit verify
// --database PATH`). db_error when it cannot be opened, db_not_rackgate,
// db_schema_old (kUnsupported) when the file predates the chain.
Result<AuditChainReport> VerifyAuditChainFile(const std::string& path,
                                              const std::optional<AuditAnchor>& anchor = std::nullopt);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_STORE_H_
