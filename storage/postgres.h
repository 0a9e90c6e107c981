// The SQL seam (storage/sql.h) on PostgreSQL, over libpq's C API: RAII for
// connections and results, statements prepared once per connection, and
// PostgreSQL failures turned into StoreError (docs/storage.md, "PostgreSQL").
#ifndef RACKGATE_STORAGE_POSTGRES_H_
#define RACKGATE_STORAGE_POSTGRES_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/postgres.h is internal to storage/; include storage/store.h"
#endif

#include <libpq-fe.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "storage/sql.h"
#include "storage/types.h"

namespace rackgate::storage {

struct PgConnCloser {
  void operator()(PGconn* conn) const { PQfinish(conn); }
};
using PgConnPtr = std::unique_ptr<PGconn, PgConnCloser>;

struct PgResultCloser {
  void operator()(PGresult* res) const { PQclear(res); }
};
using PgResultPtr = std::unique_ptr<PGresult, PgResultCloser>;

// The key of pg_advisory_xact_lock that every write transaction of every
// appliance takes: the fleet-wide write lock ("RGATWRIT").
inline constexpr int64_t kPgWriteLockKey = 0x5247415457524954;

// `sql` with `?N` parameters turned into `$N`, leaving '...' strings,
// "..." identifiers and -- comments alone; `*max_param` gets the highest N
// (0 when none).
std::string PgPlaceholders(std::string_view sql, int* max_param);

// The status of a failed statement (`res` may be null: libpq could not even
// send it). db_unavailable when the connection is lost or the server cannot
// take writes (SQLSTATE class 08, 57P01-57P03, 25006); db_busy for
// serialization failures, deadlocks and lock timeouts (40001, 40P01, 55P03);
// db_error otherwise. `what` names the operation; the server's message
// follows it. Never carries the connection's URL or password.
Status PgStatus(PGconn* conn, const PGresult* res, std::string_view what);

// Connects to `url` (a postgresql:// URI or a key=value string) with the
// session settings of docs/storage.md, without SETs; the URL's own
// parameters win over the defaults. db_unavailable when the server cannot
// be reached; the message never repeats the URL or its password.
Result<PgConnPtr> PgConnect(const std::string& url);

class PgConnection;

class PgStmt final : public StmtImpl {
 public:
  // `sql` is the text as written (`?N`).
  PgStmt(PgConnection* conn, const std::string& sql);
  PgStmt(const PgStmt&) = delete;
  PgStmt& operator=(const PgStmt&) = delete;

  void BindInt(int i, int64_t v) override;
  void BindText(int i, std::string_view v) override;
  void BindBlob(int i, const std::vector<uint8_t>& v) override;
  void BindNull(int i) override;
  bool Step() override;
  void Rewind() noexcept override;
  void Clear() noexcept override;
  bool IsNull(int col) const override;
  int64_t Int(int col) const override;
  std::string Text(int col) const override;
  std::vector<uint8_t> Blob(int col) const override;

 private:
  struct Param {
    Oid type = 0;  // 0: NULL, let the server infer the type
    bool is_null = true;
    bool binary = false;
    std::string value;
  };
  Param& At(int i);
  // The current row's column, checked.
  const char* Value(int col) const;

  PgConnection* conn_;
  const std::string sql_;  // as written, for messages
  std::string pg_sql_;     // with $N
  std::vector<Param> params_;
  PgResultPtr res_;
  bool executed_ = false;
  int row_ = -1;
};

// One PostgreSQL connection and its statement cache. Used by one thread at
// a time; the Database guarantees that.
class PgConnection final : public Connection {
 public:
  // Connects (PgConnect) and applies the session settings: synchronous_commit
  // on (unless the server's is remote_apply), lock_timeout =
  // options.busy_timeout_ms, idle_in_transaction_session_timeout 60 s,
  // statement_timeout 30 s, bytea_output hex, and read-only transactions by
  // default for readers.
  static Result<std::unique_ptr<PgConnection>> Open(const std::string& url, const StoreOptions& options,
                                                    bool read_only);

  Dialect dialect() const override { return Dialect::kPostgres; }
  Stmt Prepare(const std::string& sql) override;
  void Exec(const char* sql) override;
  int64_t Changes() const override { return changes_; }
  // kWrite: BEGIN (read committed), then pg_advisory_xact_lock of
  // kPgWriteLockKey: the fleet-wide write lock, held until COMMIT/ROLLBACK.
  // kRead: BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY (one snapshot).
  void Begin(TxKind kind) override;
  bool InTransaction() const noexcept override;
  void RollbackQuietly() noexcept override;
  bool Broken() const noexcept override { return PQstatus(conn_.get()) == CONNECTION_BAD; }
  PGconn* conn() const { return conn_.get(); }

 private:
  friend class PgStmt;
  explicit PgConnection(PgConnPtr conn) : conn_(std::move(conn)) {}

  // Runs `pg_sql` prepared for these parameter types (preparing it on first
  // use), and returns its result; throws on failure.
  PgResultPtr Execute(const std::string& sql, const std::string& pg_sql, const std::vector<Oid>& types,
                      const std::vector<const char*>& values, const std::vector<int>& lengths,
                      const std::vector<int>& formats);
  // Prepares `pg_sql` as statement `name` for these parameter types;
  // throws on failure.
  void Prepare(const std::string& name, const std::string& sql, const std::string& pg_sql,
               const std::vector<Oid>& types);
  // Checks a result and records Changes(); throws on failure.
  void Check(const PGresult* res, const std::string& sql);

  PgConnPtr conn_;  // declared first: destroyed after the statements
  std::unordered_map<std::string, std::unique_ptr<PgStmt>> cache_;
  // Statement names on the server, by parameter types and SQL text.
  std::map<std::string, std::string> prepared_;
  int64_t changes_ = 0;
};

}  // namespace rackgate::storage

#endif  // RACKGATE_STORAGE_POSTGRES_H_
