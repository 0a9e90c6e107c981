// Moving an appliance's store from SQLite to PostgreSQL (`rackgatectl db
// migrate`; docs/ha.md, "Moving an appliance from SQLite to PostgreSQL"):
// every table of a stopped appliance's SQLite file copied, ids and the audit
// chain kept, into an empty database, in one transaction, then checked there.
#ifndef RACKGATE_STORAGE_COPY_H_
#define RACKGATE_STORAGE_COPY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/types.h"

namespace rackgate::storage {

struct CopyOptions {
  // Copy and check everything, then roll back: nothing is written.
  bool dry_run = false;
  // Called for each table as it starts (done 0), every `progress_every`
  // rows and when it ends (done == total).
  std::function<void(const std::string& table, int64_t done, int64_t total)> progress;
  int64_t progress_every = 10000;
};

struct TableCount {
  std::string table;
  int64_t source_rows = 0;
  int64_t target_rows = 0;  // counted on the target after the copy
};

struct CopyReport {
  int schema_version = 0;
  std::vector<TableCount> tables;  // in the order they were copied (parents first)
  AuditChainReport source_audit;   // the chain walked on the source
  AuditChainReport target_audit;   // and on the target, in the copy's transaction
  bool dry_run = false;
};

// Copies the SQLite store at `source_path` into `target`, a database string
// as OpenStore takes it (postgresql://... in production; a path or
// sqlite:PATH is a fresh SQLite file, which tests use). The source must be
// at the latest schema version and not open in another process; the target's
// schema is created when absent, and it must hold no row in any table.
//
// Reasons: db_missing (kNotFound: no file at source_path), db_in_use (kIoError: another process, rackgated, has the
// source open), db_schema_old (kUnsupported: start rackgated once to migrate
// it), db_newer_than_code, db_not_rackgate, target_not_empty (kUnsupported:
// names the table and its row count; nothing is written), copy_mismatch
// (kCorruption: the target's counts or audit head differ from the source's;
// rolled back), db_unavailable / db_error from either database. Messages
// never repeat the target's URL (it may hold a password).
Result<CopyReport> CopyDatabase(const std::string& source_path, const std::string& target,
                                const CopyOptions& options = {});

// db_in_use when a process other than this one has the SQLite file at
// `path` open (it holds the lock SQLite's WAL mode takes for as long as a
// connection is open), else Ok. Ok when the file does not exist.
Status CheckSqliteNotInUse(const std::string& path);

}  // namespace rackgate::storage

#ifdef RACKGATE_STORAGE_INTERNAL
#include "storage/sql.h"

namespace rackgate::storage {

// The copy itself, against the seam: `source` an SQLite connection to a
// store at the latest schema version, `target` a connection to a migrated,
// empty store (SQLite or PostgreSQL). Reads the source in one read
// transaction and writes the target in one write transaction.
Result<CopyReport> CopyDatabase(Connection& source, Connection& target, const CopyOptions& options = {});

}  // namespace rackgate::storage
#endif  // RACKGATE_STORAGE_INTERNAL

#endif  // RACKGATE_STORAGE_COPY_H_
