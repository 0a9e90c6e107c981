// The database schema as a list of forward-only migrations (docs/storage.md).
#ifndef RACKGATE_STORAGE_SCHEMA_H_
#define RACKGATE_STORAGE_SCHEMA_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/schema.h is internal to storage/; include storage/store.h"
#endif

#include <cstdint>
#include <span>

#include "base/status.h"

namespace rackgate::storage {

class Connection;

// PRAGMA application_id of a rackgate database: "RGAT".
inline constexpr int32_t kApplicationId = 0x52474154;

struct Migration {
  int version;              // PRAGMA user_version after this step
  const char* description;  // one line, for the log and docs
  const char* sql;          // run in one transaction with the version bump
  // Runs after `sql` in the same transaction, for what SQL cannot compute
  // (the audit chain's hashes); nullptr for most migrations.
  void (*after_sql)(Connection* conn) = nullptr;
};

// Every migration, in order: migration i brings version i to i + 1. Old
// entries are never edited once released; a change is a new entry.
std::span<const Migration> Migrations();

// The version the newest migration reaches.
int LatestSchemaVersion();

// Brings the database to `target` (REQUIRES: target <= LatestSchemaVersion()),
// one transaction per migration. db_newer_than_code when the file's version
// is above LatestSchemaVersion(), db_not_rackgate when the file holds tables
// but is not a rackgate database, db_error/db_busy on SQLite failures. Tests
// use a lower target to build old databases.
Status Migrate(Connection* conn, int target);

// PRAGMA user_version.
Result<int> SchemaVersion(Connection* conn);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SCHEMA_H_
