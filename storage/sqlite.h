// RAII for SQLite handles: connections, cached prepared statements and
// transactions, with SQLite failures turned into StoreError.
//
// Inside storage/, failures (SQLite errors and refusals alike) are thrown as
// StoreError and caught at the public boundary (Guard, below), which turns
// them back into a Status. Nothing here throws from a destructor.
#ifndef RACKGATE_STORAGE_SQLITE_H_
#define RACKGATE_STORAGE_SQLITE_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/sqlite.h is internal to storage/; include storage/store.h"
#endif

#include <sqlite3.h>

#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace rackgate::storage {

// A failed Status on its way to the public boundary.
class StoreError : public std::exception {
 public:
  explicit StoreError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.reason().c_str(); }

 private:
  Status status_;
};

[[noreturn]] inline void Fail(Status status) { throw StoreError(std::move(status)); }

// Runs f() and returns its result, or the Status of a StoreError it threw:
// every public SqliteStore method runs its body under Guard.
template <typename F>
auto Guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const StoreError& e) {
    return e.status();
  }
}

// db_busy for SQLITE_BUSY/SQLITE_LOCKED, db_error otherwise; `what` names the
// operation, SQLite's message follows it.
Status SqliteStatus(sqlite3* db, int rc, std::string_view what);

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
};
struct StmtFinalizer {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using DbPtr = std::unique_ptr<sqlite3, SqliteCloser>;
using StmtPtr = std::unique_ptr<sqlite3_stmt, StmtFinalizer>;

// A prepared statement BORROWED from its connection's cache for one use:
// bind, step, read columns. The destructor resets it and clears its bindings
// so the next user starts clean. Parameter and column indexes are SQLite's
// (parameters from 1, columns from 0).
class Stmt {
 public:
  Stmt(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Stmt() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& BindInt(int i, int64_t v);
  Stmt& BindText(int i, std::string_view v);
  Stmt& BindBlob(int i, const std::vector<uint8_t>& v);
  Stmt& BindNull(int i);
  Stmt& BindOptInt(int i, const std::optional<int64_t>& v) { return v ? BindInt(i, *v) : BindNull(i); }
  Stmt& BindOptText(int i, const std::optional<std::string>& v) { return v ? BindText(i, *v) : BindNull(i); }
  Stmt& BindOptBlob(int i, const std::optional<std::vector<uint8_t>>& v) {
    return v ? BindBlob(i, *v) : BindNull(i);
  }

  // True when a row is available, false when done.
  bool Step();
  // Steps to the end (a statement that returns no rows, or whose rows are
  // ignored), then resets it so that it can be bound and run again.
  void Run();

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const;
  std::vector<uint8_t> Blob(int col) const;
  std::optional<int64_t> OptInt(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<int64_t>(Int(col));
  }
  std::optional<std::string> OptText(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<std::string>(Text(col));
  }
  std::optional<std::vector<uint8_t>> OptBlob(int col) const {
    return IsNull(col) ? std::nullopt : std::optional<std::vector<uint8_t>>(Blob(col));
  }

 private:
  void Check(int rc, const char* what);

  sqlite3* db_;
  sqlite3_stmt* stmt_;
};

// One SQLite connection and its statement cache. Used by one thread at a time
// (opened with SQLITE_OPEN_NOMUTEX); the Store guarantees that.
class Connection {
 public:
  // Opens `path` (which must exist or SQLITE_OPEN_CREATE be in flags) and
  // applies the per-connection settings: busy_timeout, foreign_keys,
  // synchronous, trusted_schema, and query_only for readers.
  static Result<std::unique_ptr<Connection>> Open(const std::string& path, int busy_timeout_ms, bool read_only);

  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // The cached statement for `sql` (one statement), prepared on first use.
  // One Stmt per SQL text at a time: do not nest two uses of the same text.
  Stmt Prepare(const std::string& sql);
  // Runs one or more statements without results (DDL, PRAGMA), parsed anew
  // on each call.
  void Exec(const char* sql);
  // Runs one statement without results from the statement cache: for the
  // ones a transaction runs each time (BEGIN, COMMIT, SAVEPOINT), whose
  // parsing was 3% of rackgated's CPU in a boot storm.
  void Run(const std::string& sql) { Prepare(sql).Run(); }
  int64_t LastInsertRowid() const { return sqlite3_last_insert_rowid(db_.get()); }
  int Changes() const { return sqlite3_changes(db_.get()); }
  sqlite3* db() const { return db_.get(); }

 private:
  explicit Connection(DbPtr db) : db_(std::move(db)) {}

  DbPtr db_;  // declared first: destroyed after the statements
  std::unordered_map<std::string, StmtPtr> cache_;
};

// A transaction on one connection. Rolls back in the destructor unless
// Commit() ran and succeeded; the destructor never throws.
class Transaction {
 public:
  enum class Kind {
    kRead,   // BEGIN (deferred): one consistent snapshot for several reads
    kWrite,  // BEGIN IMMEDIATE: takes the write lock now, not at the first write
  };
  Transaction(Connection* conn, Kind kind);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void Commit();

 private:
  Connection* conn_;
  bool done_ = false;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SQLITE_H_
