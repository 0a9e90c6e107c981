// The SQL seam: connections, prepared statements and transactions as the
// store's logic uses them, whatever the database. The SQLite backend
// (storage/sqlite.h) and the PostgreSQL backend (storage/postgres.h)
// implement it; the store's logic (pools.cc, machines.cc, ...) is written
// once against it.
//
// One SQL text serves both databases: parameters are written `?1`, `?2`, ...
// (the PostgreSQL backend turns them into `$1`, `$2`), new ids come back
// with `RETURNING id`, upserts are `ON CONFLICT ... DO UPDATE`, and nothing
// names a function or a type only one of them has. Where the two must
// differ, the logic asks `Connection::dialect()`.
//
// Inside storage/, failures (database errors and refusals alike) are thrown
// as StoreError and caught at the public boundary (Guard, below), which turns
// them back into a Status. Nothing here throws from a destructor.
#ifndef RACKGATE_STORAGE_SQL_H_
#define RACKGATE_STORAGE_SQL_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/sql.h is internal to storage/; include storage/store.h"
#endif

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
// every public store method runs its body under Guard.
template <typename F>
auto Guard(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const StoreError& e) {
    return e.status();
  }
}

enum class Dialect { kSqlite, kPostgres };

// A backend's prepared statement, owned by its connection's cache. Parameter
// indexes start at 1, column indexes at 0. Failures are thrown (StoreError).
class StmtImpl {
 public:
  virtual ~StmtImpl() = default;
  virtual void BindInt(int i, int64_t v) = 0;
  virtual void BindText(int i, std::string_view v) = 0;
  virtual void BindBlob(int i, const std::vector<uint8_t>& v) = 0;
  virtual void BindNull(int i) = 0;
  // Executes on the first call; true when a row is available.
  virtual bool Step() = 0;
  // Back to before the first Step, bindings kept: it can run again.
  virtual void Rewind() noexcept = 0;
  // Rewind and forget the bindings: the next user starts clean.
  virtual void Clear() noexcept = 0;
  virtual bool IsNull(int col) const = 0;
  virtual int64_t Int(int col) const = 0;
  virtual std::string Text(int col) const = 0;
  virtual std::vector<uint8_t> Blob(int col) const = 0;
};

// Round trips to the database, as the database sees them: each execution of
// a statement (BEGIN, COMMIT, SAVEPOINT and a write's lock included; DDL run
// by Exec and a backend's own statement preparation not), and each
// transaction (every statement runs in one: the store runs none outside a
// Transaction). A Database's connections share one; counts, not times, so
// that a test can hold them exact (docs/storage.md, "Statements and writes
// per machine").
struct RoundTripCounts {
  std::atomic<uint64_t> statements{0};
  std::atomic<uint64_t> transactions{0};
};
struct RoundTrips {
  uint64_t statements = 0;
  uint64_t transactions = 0;
};

// A prepared statement BORROWED from its connection's cache for one use:
// bind, step, read columns. The destructor clears it so the next user starts
// clean.
class Stmt {
 public:
  // `counts` (may be null) is told of each execution.
  explicit Stmt(StmtImpl* impl, RoundTripCounts* counts = nullptr) : impl_(impl), counts_(counts) {}
  ~Stmt() { impl_->Clear(); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& BindInt(int i, int64_t v) {
    impl_->BindInt(i, v);
    return *this;
  }
  Stmt& BindText(int i, std::string_view v) {
    impl_->BindText(i, v);
    return *this;
  }
  Stmt& BindBlob(int i, const std::vector<uint8_t>& v) {
    impl_->BindBlob(i, v);
    return *this;
  }
  Stmt& BindNull(int i) {
    impl_->BindNull(i);
    return *this;
  }
  Stmt& BindOptInt(int i, const std::optional<int64_t>& v) { return v ? BindInt(i, *v) : BindNull(i); }
  Stmt& BindOptText(int i, const std::optional<std::string>& v) { return v ? BindText(i, *v) : BindNull(i); }
  Stmt& BindOptBlob(int i, const std::optional<std::vector<uint8_t>>& v) {
    return v ? BindBlob(i, *v) : BindNull(i);
  }

  // True when a row is available, false when done.
  bool Step() {
    if (!executed_ && counts_ != nullptr) counts_->statements.fetch_add(1, std::memory_order_relaxed);
    executed_ = true;
    return impl_->Step();
  }
  // Steps to the end (a statement that returns no rows, or whose rows are
  // ignored), then rewinds it so that it can be bound and run again.
  void Run() {
    while (Step()) {
    }
    impl_->Rewind();
    executed_ = false;
  }

  bool IsNull(int col) const { return impl_->IsNull(col); }
  int64_t Int(int col) const { return impl_->Int(col); }
  std::string Text(int col) const { return impl_->Text(col); }
  std::vector<uint8_t> Blob(int col) const { return impl_->Blob(col); }
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
  StmtImpl* impl_;
  RoundTripCounts* counts_;
  bool executed_ = false;
};

// One database connection and its statement cache, used by one thread at a
// time (the Database guarantees that).
class Connection {
 public:
  enum class TxKind {
    kRead,   // one consistent snapshot for several reads
    kWrite,  // the store's write lock, taken now (not at the first write)
  };

  virtual ~Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  virtual Dialect dialect() const = 0;
  // The cached statement for `sql` (one statement), prepared on first use.
  // One Stmt per SQL text at a time: do not nest two uses of the same text.
  virtual Stmt Prepare(const std::string& sql) = 0;
  // Runs one or more statements without results (DDL), parsed anew on each
  // call.
  virtual void Exec(const char* sql) = 0;
  // Runs one statement without results from the statement cache.
  void Run(const std::string& sql) { Prepare(sql).Run(); }
  // Rows changed by the last INSERT, UPDATE or DELETE.
  virtual int64_t Changes() const = 0;

  // Transactions (see Transaction, below). Begin throws; a failed BEGIN
  // leaves no transaction open.
  virtual void Begin(TxKind kind) = 0;
  // True while a transaction is open, including one that failed and waits
  // for its rollback.
  virtual bool InTransaction() const noexcept = 0;
  // Rolls back whatever is open; never throws, ignores failures.
  virtual void RollbackQuietly() noexcept = 0;
  // True when the connection is gone for good (the server closed it, a
  // failover): the Database opens a new one rather than use it again.
  virtual bool Broken() const noexcept { return false; }

  // Where this connection's statements and transactions are counted (the
  // Database's; null: nowhere). Set before the connection is used.
  void CountRoundTripsIn(RoundTripCounts* counts) { counts_ = counts; }
  RoundTripCounts* round_trip_counts() const { return counts_; }

  // The audit chain's head as this connection's open write transaction left
  // it (storage/audit.cc, WriteAudit): read once per transaction, under the
  // write lock that keeps every other writer out, then carried from row to
  // row. Forgotten when a transaction begins and when a savepoint is rolled
  // back (database.cc), so it never outlives what it describes.
  struct AuditHead {
    int64_t id = 0;
    std::string hash;
  };
  std::optional<AuditHead>& audit_head() { return audit_head_; }

 protected:
  Connection() = default;
  // For the backends' Prepare: Stmt(impl, counts_).
  RoundTripCounts* counts_ = nullptr;

 private:
  std::optional<AuditHead> audit_head_;
};

// A transaction on one connection. Rolls back in the destructor unless
// Commit() ran and succeeded; the destructor never throws.
class Transaction {
 public:
  using Kind = Connection::TxKind;
  Transaction(Connection* conn, Kind kind) : conn_(conn) {
    conn_->audit_head().reset();
    conn_->Begin(kind);
    if (RoundTripCounts* c = conn_->round_trip_counts()) c->transactions.fetch_add(1, std::memory_order_relaxed);
  }
  ~Transaction() {
    if (!done_ && conn_->InTransaction()) {
      conn_->RollbackQuietly();
      if (RoundTripCounts* c = conn_->round_trip_counts()) c->statements.fetch_add(1, std::memory_order_relaxed);
    }
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  void Commit() {
    conn_->Run("COMMIT");
    done_ = true;
  }

 private:
  Connection* conn_;
  bool done_ = false;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_SQL_H_
