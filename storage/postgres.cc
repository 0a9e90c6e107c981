// RAII over libpq, statements prepared per connection, and PostgreSQL
// failures as StoreError.
#include "storage/postgres.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace rackgate::storage {

namespace {

// pg_type OIDs (catalog/pg_type_d.h, stable across versions).
constexpr Oid kInt8Oid = 20;
constexpr Oid kTextOid = 25;
constexpr Oid kByteaOid = 17;

// libpq's messages end with a newline and may span lines: one line for logs.
std::string OneLine(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n' || c == '\r' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// `text` with every occurrence of `secret` replaced.
std::string Scrub(std::string text, const std::string& secret) {
  if (secret.empty()) return text;
  for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
    text.replace(at, secret.size(), "***");
    at += 3;
  }
  return text;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsSqlState(std::string_view state, std::initializer_list<std::string_view> states) {
  for (std::string_view s : states) {
    if (state == s) return true;
  }
  return false;
}

}  // namespace

std::string PgPlaceholders(std::string_view sql, int* max_param) {
  std::string out;
  out.reserve(sql.size());
  int highest = 0;
  size_t i = 0;
  while (i < sql.size()) {
    const char c = sql[i];
    if (c == '\'' || c == '"') {
      // A quoted string or identifier; a doubled quote stays inside it.
      const size_t end = sql.find(c, i + 1);
      const size_t stop = end == std::string_view::npos ? sql.size() : end + 1;
      out.append(sql.substr(i, stop - i));
      i = stop;
    } else if (c == '-' && i + 1 < sql.size() && sql[i + 1] == '-') {
      const size_t end = sql.find('\n', i);
      const size_t stop = end == std::string_view::npos ? sql.size() : end;
      out.append(sql.substr(i, stop - i));
      i = stop;
    } else if (c == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
      size_t j = i + 1;
      int n = 0;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9' && n < 100000) {
        n = n * 10 + (sql[j] - '0');
        ++j;
      }
      highest = std::max(highest, n);
      out += '$';
      out.append(sql.substr(i + 1, j - i - 1));
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  if (max_param != nullptr) *max_param = highest;
  return out;
}

Status PgStatus(PGconn* conn, const PGresult* res, std::string_view what) {
  const char* state_field = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  const std::string_view state = state_field != nullptr ? state_field : "";
  std::string text = res != nullptr ? PQresultErrorMessage(res) : "";
  if (text.empty() && conn != nullptr) text = PQerrorMessage(conn);
  std::string message(what);
  message += ": ";
  message += OneLine(text);
  if (!state.empty()) {
    message += " (SQLSTATE ";
    message += state;
    message += ")";
  }
  const bool lost = (conn != nullptr && PQstatus(conn) == CONNECTION_BAD) || state.starts_with("08") ||
                    IsSqlState(state, {"57P01", "57P02", "57P03", "25006"});
  if (lost) {
    return Status::IoError("db_unavailable",
                           message + "; the PostgreSQL server is unreachable or cannot take writes (a standby): "
                                     "rackgated reconnects on its own, check the server and the URL's hosts");
  }
  if (IsSqlState(state, {"40001", "40P01", "55P03"})) return Status::IoError("db_busy", std::move(message));
  return Status::IoError("db_error", std::move(message));
}

Result<PgConnPtr> PgConnect(const std::string& url) {
  // The password, if the URL has one, so that no message repeats it.
  std::string password;
  {
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(url.c_str(), &err);
    if (opts == nullptr) {
      // SECURITY: libpq's message may quote the URL, password included.
      PQfreemem(err);
      return Status::InvalidArgument("field_invalid",
                                     "the database URL is not a valid PostgreSQL URI or key=value string "
                                     "(docs/storage.md, \"PostgreSQL\")");
    }
    for (PQconninfoOption* o = opts; o->keyword != nullptr; ++o) {
      if (std::strcmp(o->keyword, "password") == 0 && o->val != nullptr) password = o->val;
    }
    PQconninfoFree(opts);
  }
  // Defaults first, the URL last: with expand_dbname, libpq processes the
  // keywords in order and the last value of a keyword wins, so whatever the
  // URL sets overrides these.
  const char* const keywords[] = {"application_name",
                                  "connect_timeout",
                                  "keepalives",
                                  "keepalives_idle",
                                  "keepalives_interval",
                                  "keepalives_count",
                                  // Readers too: an asynchronous standby's stale
                                  // read could un-revoke a machine.
                                  "target_session_attrs",
                                  "dbname",
                                  nullptr};
  const char* const values[] = {"rackgated", "5", "1", "5", "2", "3", "read-write", url.c_str(), nullptr};
  PgConnPtr conn(PQconnectdbParams(keywords, values, /*expand_dbname=*/1));
  if (conn == nullptr) return Status::IoError("db_unavailable", "connect to PostgreSQL: out of memory");
  if (PQstatus(conn.get()) != CONNECTION_OK) {
    std::string message = Scrub(Scrub(OneLine(PQerrorMessage(conn.get())), url), password);
    return Status::IoError("db_unavailable", "connect to PostgreSQL: " + message +
                                                 "; check that the server runs and accepts rackgated "
                                                 "(the database URL's host, port, user and pg_hba.conf)");
  }
  return conn;
}

// --- PgStmt ------------------------------------------------------------------

PgStmt::PgStmt(PgConnection* conn, const std::string& sql) : conn_(conn), sql_(sql) {
  int n = 0;
  pg_sql_ = PgPlaceholders(sql, &n);
  params_.resize(static_cast<size_t>(n));
}

PgStmt::Param& PgStmt::At(int i) {
  if (i < 1 || static_cast<size_t>(i) > params_.size()) {
    Fail(Status::IoError("db_error", "bind: no parameter ?" + std::to_string(i) + " in (" + sql_ + ")"));
  }
  return params_[static_cast<size_t>(i - 1)];
}

void PgStmt::BindInt(int i, int64_t v) {
  At(i) = Param{kInt8Oid, false, false, std::to_string(v)};
}

void PgStmt::BindText(int i, std::string_view v) {
  // PostgreSQL's text cannot hold a NUL byte.
  if (v.find('\0') != std::string_view::npos) {
    Fail(Status::InvalidArgument("field_invalid", "text holds a NUL byte, which the database cannot store"));
  }
  At(i) = Param{kTextOid, false, false, std::string(v)};
}

void PgStmt::BindBlob(int i, const std::vector<uint8_t>& v) {
  At(i) = Param{kByteaOid, false, true, std::string(v.begin(), v.end())};
}

void PgStmt::BindNull(int i) {
  At(i) = Param{};
}

bool PgStmt::Step() {
  if (!executed_) {
    const size_t n = params_.size();
    std::vector<Oid> types(n);
    std::vector<const char*> values(n);
    std::vector<int> lengths(n);
    std::vector<int> formats(n);
    for (size_t i = 0; i < n; ++i) {
      const Param& p = params_[i];
      types[i] = p.type;
      values[i] = p.is_null ? nullptr : p.value.c_str();
      lengths[i] = static_cast<int>(p.value.size());
      formats[i] = p.binary ? 1 : 0;
    }
    res_ = conn_->Execute(sql_, pg_sql_, types, values, lengths, formats);
    executed_ = true;
    row_ = -1;
  }
  if (res_ == nullptr) return false;
  if (row_ < PQntuples(res_.get())) ++row_;
  return row_ < PQntuples(res_.get());
}

void PgStmt::Rewind() noexcept {
  res_.reset();
  executed_ = false;
  row_ = -1;
}

void PgStmt::Clear() noexcept {
  Rewind();
  for (Param& p : params_) {
    p.type = 0;
    p.is_null = true;
    p.binary = false;
    p.value.clear();
  }
}

const char* PgStmt::Value(int col) const {
  if (res_ == nullptr || row_ < 0 || row_ >= PQntuples(res_.get()) || col < 0 || col >= PQnfields(res_.get())) {
    Fail(Status::IoError("db_error", "no column " + std::to_string(col) + " in this row of (" + sql_ + ")"));
  }
  return PQgetvalue(res_.get(), row_, col);
}

bool PgStmt::IsNull(int col) const {
  Value(col);
  return PQgetisnull(res_.get(), row_, col) != 0;
}

int64_t PgStmt::Int(int col) const {
  const char* v = Value(col);
  if (PQgetisnull(res_.get(), row_, col) != 0) return 0;  // as SQLite
  const std::string_view s(v, static_cast<size_t>(PQgetlength(res_.get(), row_, col)));
  if (s == "t") return 1;
  if (s == "f") return 0;
  int64_t out = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || end != s.data() + s.size()) {
    Fail(Status::IoError("db_error", "column " + std::to_string(col) + " of (" + sql_ + ") is not an integer"));
  }
  return out;
}

std::string PgStmt::Text(int col) const {
  const char* v = Value(col);
  return std::string(v, static_cast<size_t>(PQgetlength(res_.get(), row_, col)));
}

std::vector<uint8_t> PgStmt::Blob(int col) const {
  const char* v = Value(col);
  const size_t n = static_cast<size_t>(PQgetlength(res_.get(), row_, col));
  if (PQftype(res_.get(), col) != kByteaOid) return std::vector<uint8_t>(v, v + n);
  // bytea in text format, hex output (set at connect): \x then two digits a
  // byte.
  if (n < 2 || v[0] != '\\' || v[1] != 'x' || n % 2 != 0) {
    Fail(Status::IoError("db_error", "column " + std::to_string(col) + " of (" + sql_ + ") is not hex bytea"));
  }
  std::vector<uint8_t> out;
  out.reserve((n - 2) / 2);
  for (size_t i = 2; i < n; i += 2) {
    const int hi = HexDigit(v[i]);
    const int lo = HexDigit(v[i + 1]);
    if (hi < 0 || lo < 0) {
      Fail(Status::IoError("db_error", "column " + std::to_string(col) + " of (" + sql_ + ") is not hex bytea"));
    }
    out.push_back(static_cast<uint8_t>(hi * 16 + lo));
  }
  return out;
}

// --- PgConnection ------------------------------------------------------------

Result<std::unique_ptr<PgConnection>> PgConnection::Open(const std::string& url, const StoreOptions& options,
                                                         bool read_only) {
  auto pg = PgConnect(url);
  if (!pg.ok()) return pg.status();
  std::unique_ptr<PgConnection> conn(new PgConnection(std::move(pg).value()));
  try {
    // Durability (docs/storage.md): a commit returns once it is flushed on
    // the primary and, with synchronous_standby_names, on a synchronous
    // standby. Never weaker, whatever the server or the URL says; a server
    // set to remote_apply (stricter) keeps it.
    Stmt s = conn->Prepare("SELECT current_setting('synchronous_commit')");
    const std::string sync = s.Step() ? s.Text(0) : "";
    s.Run();
    std::string sets;
    if (sync != "remote_apply") sets += "SET synchronous_commit = on; ";
    // A lock (the fleet-wide write lock included) waited for longer than
    // this fails with 55P03: db_busy, as SQLite's busy_timeout.
    sets += "SET lock_timeout = " + std::to_string(std::max(1, options.busy_timeout_ms)) + "; ";
    // A hung appliance cannot hold the write lock forever.
    sets += "SET idle_in_transaction_session_timeout = '60s'; ";
    sets += "SET statement_timeout = '30s'; ";
    sets += "SET bytea_output = 'hex'; ";
    if (read_only) sets += "SET default_transaction_read_only = on; ";
    conn->Exec(sets.c_str());
  } catch (const StoreError& e) {
    return e.status();
  }
  return conn;
}

Stmt PgConnection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) it = cache_.emplace(sql, std::make_unique<PgStmt>(this, sql)).first;
  return Stmt(it->second.get(), counts_);
}

void PgConnection::Check(const PGresult* res, const std::string& sql) {
  const ExecStatusType st = PQresultStatus(res);
  if (res == nullptr || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)) {
    Fail(PgStatus(conn_.get(), res, "step (" + sql + ")"));
  }
  const std::string_view tag = PQcmdStatus(const_cast<PGresult*>(res));
  if (tag.starts_with("INSERT") || tag.starts_with("UPDATE") || tag.starts_with("DELETE") ||
      tag.starts_with("MERGE")) {
    const char* n = PQcmdTuples(const_cast<PGresult*>(res));
    changes_ = n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0;
  }
  // COMMIT of a transaction that had failed answers ROLLBACK, not an error.
  if (sql == "COMMIT" && tag == "ROLLBACK") {
    Fail(Status::IoError("db_error", "commit: the transaction had failed and was rolled back"));
  }
}

PgResultPtr PgConnection::Execute(const std::string& sql, const std::string& pg_sql, const std::vector<Oid>& types,
                                  const std::vector<const char*>& values, const std::vector<int>& lengths,
                                  const std::vector<int>& formats) {
  // The server plans a statement for its parameters' types: one prepared
  // statement per SQL text and types, so it never has to guess.
  std::string key;
  for (Oid t : types) key += std::to_string(t) + ",";
  key += ';';
  key += sql;
  auto it = prepared_.find(key);
  if (it == prepared_.end()) {
    std::string name = "rg" + std::to_string(prepared_.size() + 1);
    Prepare(name, sql, pg_sql, types);
    it = prepared_.emplace(std::move(key), std::move(name)).first;
  }
  PgResultPtr res(PQexecPrepared(conn_.get(), it->second.c_str(), static_cast<int>(types.size()), values.data(),
                                 lengths.data(), formats.data(), /*resultFormat=*/0));
  Check(res.get(), sql);
  return res;
}

void PgConnection::Prepare(const std::string& name, const std::string& sql, const std::string& pg_sql,
                           const std::vector<Oid>& types) {
  const bool has_null = std::find(types.begin(), types.end(), Oid{0}) != types.end();
  // A NULL parameter whose type nothing in the statement tells (`?3 IS NULL
  // OR hostname = ?3`: its first use decides) fails with 42P08 naming it;
  // then it is tried as text, as an integer, as bytes, until the server
  // takes the statement. A failed prepare would end the open transaction:
  // the tries run inside a savepoint of their own.
  const bool guard = has_null && InTransaction();
  std::vector<Oid> tried = types;
  size_t guessing = types.size();  // the parameter being guessed, if any
  for (size_t attempt = 0; attempt <= 3 * types.size(); ++attempt) {
    if (guard) Exec("SAVEPOINT rackgate_prepare");
    PgResultPtr res(PQprepare(conn_.get(), name.c_str(), pg_sql.c_str(), static_cast<int>(tried.size()),
                              tried.data()));
    if (res != nullptr && PQresultStatus(res.get()) == PGRES_COMMAND_OK) {
      if (guard) Exec("RELEASE rackgate_prepare");
      return;
    }
    const char* state = res != nullptr ? PQresultErrorField(res.get(), PG_DIAG_SQLSTATE) : nullptr;
    const char* primary = res != nullptr ? PQresultErrorField(res.get(), PG_DIAG_MESSAGE_PRIMARY) : nullptr;
    bool retry = false;
    if (has_null && state != nullptr && std::string_view(state) == "42P08" && primary != nullptr) {
      // "could not determine data type of parameter $N"
      const char* dollar = std::strrchr(primary, '$');
      const size_t k = dollar != nullptr ? static_cast<size_t>(std::atoi(dollar + 1)) : 0;
      if (k >= 1 && k <= types.size() && types[k - 1] == 0 && tried[k - 1] == 0) {
        guessing = k - 1;
        tried[guessing] = kTextOid;
        retry = true;
      }
    } else if (state != nullptr && guessing < types.size() && IsSqlState(state, {"42883", "42804", "42725"})) {
      // The guess does not fit (no operator for text = bigint, ...).
      if (tried[guessing] == kTextOid) {
        tried[guessing] = kInt8Oid;
        retry = true;
      } else if (tried[guessing] == kInt8Oid) {
        tried[guessing] = kByteaOid;
        retry = true;
      }
    }
    if (!retry) Fail(PgStatus(conn_.get(), res.get(), "prepare (" + sql + ")"));
    if (guard) Exec("ROLLBACK TO rackgate_prepare; RELEASE rackgate_prepare");
  }
  Fail(Status::IoError("db_error", "prepare (" + sql + "): the type of a NULL parameter cannot be told"));
}

void PgConnection::Exec(const char* sql) {
  PgResultPtr res(PQexec(conn_.get(), sql));
  const ExecStatusType st = PQresultStatus(res.get());
  if (res == nullptr || (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)) {
    Fail(PgStatus(conn_.get(), res.get(), "exec"));
  }
}

void PgConnection::Begin(TxKind kind) {
  if (kind == TxKind::kRead) {
    Run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    return;
  }
  // READ COMMITTED, not REPEATABLE READ: the snapshot of a repeatable-read
  // transaction would be taken before the lock below was granted, and miss
  // the commit of the writer it waited for.
  Run("BEGIN");
  try {
    Run("SELECT pg_advisory_xact_lock(" + std::to_string(kPgWriteLockKey) + ")");
  } catch (const StoreError&) {
    RollbackQuietly();
    throw;
  }
}

bool PgConnection::InTransaction() const noexcept {
  const PGTransactionStatusType st = PQtransactionStatus(conn_.get());
  return st == PQTRANS_INTRANS || st == PQTRANS_INERROR || st == PQTRANS_ACTIVE;
}

void PgConnection::RollbackQuietly() noexcept {
  if (!InTransaction()) return;
  PgResultPtr res(PQexec(conn_.get(), "ROLLBACK"));
}

}  // namespace rackgate::storage
