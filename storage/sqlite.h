// The SQL seam (storage/sql.h) on SQLite: RAII for connections and cached
// prepared statements, with SQLite failures turned into StoreError.
#ifndef RACKGATE_STORAGE_SQLITE_H_
#define RACKGATE_STORAGE_SQLITE_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/sqlite.h is internal to storage/; include storage/store.h"
#endif

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/sql.h"

namespace rackgate::storage {

// db_busy for SQLITE_BUSY/SQLITE_LOCKED, db_error otherwise; `what` names the
// operation, SQLite's message follows it.
Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
using DbPtr = std::unique_ptr<sqlite3, SqliteCloser>;

class SqliteStmt final : public StmtImpl {
 public:
  SqliteStmt(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~SqliteStmt() override { sqlite3_finalize(stmt_); }
  SqliteStmt(const SqliteStmt&) = delete;
  SqliteStmt& operator=(const SqliteStmt&) = delete;

  void BindInt(int i, int64_t v) override;
  void BindText(int i, std::string_view v) override;
  void BindBlob(int i, const std::vector<uint8_t>& v) override;
  void BindNull(int i) override;
  bool Step() override;
  void Rewind() noexcept override { sqlite3_reset(stmt_); }
  void Clear() noexcept override {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  bool IsNull(int col) const override { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) const override { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const override;
  std::vector<uint8_t> Blob(int col) const override;

 private:
  void Check(int rc, const char* what);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// One SQLite connection and its statement cache. Used by one thread at a time
// (opened with SQLITE_OPEN_NOMUTEX); the Store guarantees that.
class SqliteConnection final : public Connection {
 public:
  // Opens `path` (which must exist) and applies the per-connection settings:
  // busy_timeout, foreign_keys, synchronous, trusted_schema, and query_only
  // for readers.
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path, int busy_timeout_ms,
                                                        bool read_only);

  Dialect dialect() const override { return Dialect::kSqlite; }
  Stmt Prepare(const std::string& sql) override;
  void Exec(const char* sql) override;
  int64_t Changes() const override { return sqlite3_changes(db_.get()); }
  // BEGIN IMMEDIATE for writes: takes the write lock now, not at the first
  // write; BEGIN (deferred) for reads.
  void Begin(TxKind kind) override;
  bool InTransaction() const noexcept override { return sqlite3_get_autocommit(db_.get()) == 0; }
  // After some errors (SQLITE_FULL, IOERR, ...) SQLite has already rolled
  // back; then there is nothing to do.
  void RollbackQuietly() noexcept override;
  sqlite3* db() const { return db_.get(); }

 private:
  explicit SqliteConnection(DbPtr db) : db_(std::move(db)) {}

  DbPtr db_;  // declared first: destroyed after the statements
  std::unordered_map<std::string, std::unique_ptr<SqliteStmt>> cache_;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SQLITE_H_
