// The PostgreSQL schema as a list of forward-only migrations (docs/storage.md,
// "The PostgreSQL schema").
#ifndef RACKGATE_STORAGE_SCHEMA_POSTGRES_H_
#define RACKGATE_STORAGE_SCHEMA_POSTGRES_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/schema_postgres.h is internal to storage/; include storage/store.h"
#endif

#include <cstdint>
#include <span>

#include "base/status.h"

namespace rackgate::storage {

class Connection;

// The pg_advisory_xact_lock key every migration takes, so that appliances
// starting at once migrate one after the other.
inline constexpr int64_t kPostgresSchemaLockKey = 0x5247415453434850;  // "RGATSCHP"

// COMMENT ON TABLE rackgate_schema: what tells a rackgate database apart
// from another one that happens to have a table of that name.
inline constexpr char kPostgresSchemaComment[] = "rackgate inventory: schema version (docs/storage.md)";

struct PostgresMigration {
  int version;              // rackgate_schema.version after this step
  const char* description;  // one line, for the log and docs
  const char* sql;          // run in one transaction with the version bump
};

// Every migration, in order: migration i brings version i to i + 1. Old
// entries are never edited once released; a change is a new entry.
std::span<const PostgresMigration> PostgresMigrations();

// The version the newest migration reaches.
int LatestPostgresSchemaVersion();

// Brings the database (the first schema of the connection's search_path) to
// LatestPostgresSchemaVersion(), one transaction per migration, each under
// pg_advisory_xact_lock(kPostgresSchemaLockKey) with the version read again
// once the lock is held: of several appliances starting at once, one
// migrates and the others find the work done. REQUIRES: `conn` is a
// PostgreSQL connection with no transaction open, whose write transactions
// are READ COMMITTED (the version re-read after the lock must see what the
// lock's previous holder committed).
// db_newer_than_code when the database's version is above the code's,
// db_not_rackgate when it holds tables but no rackgate_schema (or one
// without rackgate's comment); the connection's own errors otherwise
// (db_unavailable when the server is gone).
Status MigratePostgres(Connection* conn);

// rackgate_schema.version; 0 for an empty database (and for one that is not
// rackgate's: MigratePostgres tells them apart).
Result<int> PostgresSchemaVersion(Connection* conn);

// After rows were copied in with their ids (rackgatectl db migrate): moves
// every identity column's sequence past the largest id, so that the next
// INSERT without an id does not collide. Call inside the copy's transaction.
Status ResetPostgresIdentities(Connection* conn);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SCHEMA_POSTGRES_H_
