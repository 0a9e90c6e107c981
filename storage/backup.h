// An online, consistent copy of a live appliance's SQLite store with SQLite's
// backup API, for `rackgatectl backup` (docs/operations.md, "Backups and
// restore"). Implemented in storage/sqlite.cc.
#ifndef RACKGATE_STORAGE_BACKUP_H_
#define RACKGATE_STORAGE_BACKUP_H_

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "storage/types.h"

namespace rackgate::storage {

struct SqliteBackupReport {
  int schema_version = 0;  // PRAGMA user_version of the copy
  int64_t pages = 0;
  int64_t bytes = 0;       // the copy's size
};

// Copies the rackgate SQLite store at `source_path` into a new file at
// `dest_path` (created with mode 0600; it must not exist) with
// sqlite3_backup_*, while rackgated keeps writing: the source is read in one
// read transaction (WAL: the writer is never blocked), so the copy is one
// moment of the store, whatever is committed meanwhile. The copy is left in
// rollback-journal mode, one self-contained file. `progress` (may be empty)
// is called after each step with the pages copied and the total.
//
// Reasons: db_missing (kNotFound: no file at source_path), db_not_rackgate
// (kUnsupported), field_invalid (dest_path exists), file_unwritable (it
// cannot be created), db_busy / db_error
// (SQLite's message). On failure dest_path is removed.
Result<SqliteBackupReport> BackupSqliteFile(const std::string& source_path, const std::string& dest_path,
                                            const std::function<void(int64_t done, int64_t total)>& progress = {});

// PRAGMA user_version of the SQLite file at `path`, opened read-only;
// db_not_rackgate when it is an SQLite file of something else, db_error when
// it is no SQLite file.
Result<int> SqliteFileSchemaVersion(const std::string& path);

// What a restore records in the restored store (the audit action
// `backup_restored`): the backup it came from.
struct RestoreRecord {
  std::string archive;         // the archive's path
  std::string created_at;      // the manifest's
  std::string rackgate_version;  // of the rackgate that wrote it
  int64_t head_id = 0;         // the manifest's audit head, verified before
  std::string head_hash;
};

// Migrates the restored SQLite store at `path` to this code's schema (as
// rackgated would at its start) and appends one audit row, action
// `backup_restored`, actor `actor`, chained after the restored head. Returns
// the new head. Reasons: db_not_rackgate, db_newer_than_code, db_error.
Result<AuditChainReport> RecordSqliteRestore(const std::string& path, const RestoreRecord& record,
                                             const std::string& actor, int64_t now);

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_BACKUP_H_
