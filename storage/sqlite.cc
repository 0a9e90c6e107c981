// RAII for SQLite handles, and SQLite failures as StoreError.
#include "storage/sqlite.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "storage/audit.h"
#include "storage/audit_detail.h"
#include "storage/backup.h"
#include "storage/schema.h"

namespace rackgate::storage {

Status SqliteStatus(sqlite3* db, int rc, std::string_view what) {
  std::string message(what);
  message += ": ";
  // sqlite3_errmsg describes the connection's most recent failure, which is
  // `rc` when the caller asks right after it.
  message += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Status::IoError("db_busy", std::move(message));
  return Status::IoError("db_error", std::move(message));
}

void SqliteStmt::Check(int rc, const char* what) {
  if (rc != SQLITE_OK) Fail(SqliteStatus(db_, rc, std::string(what) + " (" + sqlite3_sql(stmt_) + ")"));
}

void SqliteStmt::BindInt(int i, int64_t v) {
  Check(sqlite3_bind_int64(stmt_, i, v), "bind");
}

void SqliteStmt::BindText(int i, std::string_view v) {
  if (v.size() > INT_MAX) Fail(Status::InvalidArgument("field_invalid", "text too large"));
  Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
}

void SqliteStmt::BindBlob(int i, const std::vector<uint8_t>& v) {
  if (v.size() > INT_MAX) Fail(Status::InvalidArgument("field_invalid", "blob too large"));
  // An empty vector's data() may be null, which SQLite would store as NULL;
  // a zero-length blob stays a blob.
  if (v.empty()) {
    Check(sqlite3_bind_zeroblob(stmt_, i, 0), "bind");
  } else {
    Check(sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT), "bind");
  }
}

void SqliteStmt::BindNull(int i) {
  Check(sqlite3_bind_null(stmt_, i), "bind");
}

bool SqliteStmt::Step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Fail(SqliteStatus(db_, rc, std::string("step (") + sqlite3_sql(stmt_) + ")"));
}

std::string SqliteStmt::Text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(n));
}

std::vector<uint8_t> SqliteStmt::Blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p == nullptr ? std::vector<uint8_t>() : std::vector<uint8_t>(p, p + n);
}

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path, int busy_timeout_ms,
                                                                 bool read_only) {
  sqlite3* raw = nullptr;
  // NOMUTEX: each connection is used by one thread at a time (the Store's
  // writer mutex and reader pool), so SQLite's per-connection mutex is not
  // needed.
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbPtr db(raw);  // owns the handle even when open failed
  if (rc != SQLITE_OK) return SqliteStatus(db.get(), rc, "open " + path);
  sqlite3_extended_result_codes(db.get(), 1);
  sqlite3_busy_timeout(db.get(), busy_timeout_ms);
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(std::move(db)));
  try {
    // foreign_keys is per connection and off by default.
    conn->Exec("PRAGMA foreign_keys = ON");
    // Durability (docs/storage.md): FULL syncs the WAL at every commit, so an
    // acknowledged write survives power loss as well as a crash of the
    // process. NORMAL would survive a process crash only; a revocation or a
    // consumed session lost to a power cut would come back to life.
    conn->Exec("PRAGMA synchronous = FULL");
    // SQL functions in the schema (triggers, CHECKs) never run app-defined
    // functions with side effects.
    conn->Exec("PRAGMA trusted_schema = OFF");
    if (read_only) conn->Exec("PRAGMA query_only = ON");
  } catch (const StoreError& e) {
    return e.status();
  }
  return conn;
}

Stmt SqliteConnection::Prepare(const std::string& sql) {
  auto it = cache_.find(sql);
  if (it == cache_.end()) {
    sqlite3_stmt* raw = nullptr;
    const int rc = sqlite3_prepare_v3(db_.get(), sql.c_str(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &raw, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(raw);
      Fail(SqliteStatus(db_.get(), rc, "prepare (" + sql + ")"));
    }
    it = cache_.emplace(sql, std::make_unique<SqliteStmt>(db_.get(), raw)).first;
  }
  return Stmt(it->second.get(), counts_);
}

void SqliteConnection::Exec(const char* sql) {
  char* err = nullptr;
  const int rc = sqlite3_exec(db_.get(), sql, nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = err != nullptr ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    const int primary = rc & 0xff;
    std::string what = std::string("exec: ") + message;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) Fail(Status::IoError("db_busy", std::move(what)));
    Fail(Status::IoError("db_error", std::move(what)));
  }
}

void SqliteConnection::Begin(TxKind kind) {
  // Cached: parsing BEGIN and COMMIT was 3% of rackgated's CPU in a boot
  // storm.
  Run(kind == TxKind::kWrite ? "BEGIN IMMEDIATE" : "BEGIN");
}

void SqliteConnection::RollbackQuietly() noexcept {
  if (InTransaction()) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

namespace {

// Opens `path` read-only (it must exist) and checks that it is rackgate's.
Result<DbPtr> OpenRackgateFile(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return Status::NotFound("db_missing", "no SQLite store at " + path);
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  DbPtr db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(db.get(), rc, "open " + path + " read-only");
  sqlite3_busy_timeout(db.get(), 5000);
  sqlite3_stmt* st = nullptr;
  int prc = sqlite3_prepare_v2(db.get(), "PRAGMA application_id", -1, &st, nullptr);
  const bool ours = prc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == kApplicationId;
  sqlite3_finalize(st);
  if (prc != SQLITE_OK) return SqliteStatus(db.get(), prc, "read " + path);
  if (!ours) return Status::Unsupported("db_not_rackgate", path + " is not a rackgate database");
  return db;
}

Result<int> UserVersion(sqlite3* db, const std::string& path) {
  sqlite3_stmt* st = nullptr;
  const int rc = sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr);
  const bool row = rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW;
  const int version = row ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (!row) return SqliteStatus(db, rc == SQLITE_OK ? SQLITE_ERROR : rc, "read the schema version of " + path);
  return version;
}

// The copy, into an open destination; `src` holds a read transaction, so
// every step reads the same snapshot and the backup never restarts.
Status CopyPages(sqlite3* src, sqlite3* dst, const std::function<void(int64_t, int64_t)>& progress,
                 int64_t* pages) {
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  if (b == nullptr) return SqliteStatus(dst, sqlite3_errcode(dst), "backup init");
  int rc = SQLITE_OK;
  // 1024 pages (4 MiB) a step: a progress line per step on a large store.
  while ((rc = sqlite3_backup_step(b, 1024)) == SQLITE_OK || rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
    if (rc != SQLITE_OK) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (progress) progress(sqlite3_backup_pagecount(b) - sqlite3_backup_remaining(b), sqlite3_backup_pagecount(b));
  }
  *pages = sqlite3_backup_pagecount(b);
  if (progress) progress(*pages, *pages);
  sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) return SqliteStatus(dst, rc, "backup step");
  return Status::Ok();
}

}  // namespace

Result<SqliteBackupReport> BackupSqliteFile(const std::string& source_path, const std::string& dest_path,
                                            const std::function<void(int64_t, int64_t)>& progress) {
  auto src = OpenRackgateFile(source_path);
  if (!src.ok()) return src.status();
  // The mode before SQLite writes a byte: the copy holds every token hash
  // and the audit log.
  const int fd = ::open(dest_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) return Status::InvalidArgument("field_invalid", "the copy " + dest_path + " exists");
  if (fd < 0) {
    return Status::IoError("file_unwritable", "cannot create the copy " + dest_path + ": " + std::strerror(errno));
  }
  ::close(fd);
  SqliteBackupReport report;
  Status s = [&]() -> Status {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(dest_path.c_str(), &raw, SQLITE_OPEN_READWRITE, nullptr);
    DbPtr dst(raw);
    if (rc != SQLITE_OK) return SqliteStatus(dst.get(), rc, "open " + dest_path);
    // One snapshot for the whole copy: a read transaction held across the
    // steps (a step would otherwise restart after every commit of rackgated).
    if (int brc = sqlite3_exec(src->get(), "BEGIN; SELECT count(*) FROM sqlite_schema", nullptr, nullptr, nullptr);
        brc != SQLITE_OK) {
      return SqliteStatus(src->get(), brc, "read " + source_path);
    }
    Status copied = CopyPages(src->get(), dst.get(), progress, &report.pages);
    sqlite3_exec(src->get(), "COMMIT", nullptr, nullptr, nullptr);
    if (!copied.ok()) return copied;
    // One self-contained file: no -wal beside it in the archive.
    if (int jrc = sqlite3_exec(dst.get(), "PRAGMA journal_mode = DELETE", nullptr, nullptr, nullptr); jrc != SQLITE_OK) {
      return SqliteStatus(dst.get(), jrc, "journal mode of " + dest_path);
    }
    auto version = UserVersion(dst.get(), dest_path);
    if (!version.ok()) return version.status();
    report.schema_version = *version;
    return Status::Ok();
  }();
  if (!s.ok()) {
    ::unlink(dest_path.c_str());
    return s;
  }
  struct stat st {};
  if (::stat(dest_path.c_str(), &st) == 0) report.bytes = st.st_size;
  return report;
}

Result<AuditChainReport> RecordSqliteRestore(const std::string& path, const RestoreRecord& record,
                                             const std::string& actor, int64_t now) {
  if (auto db = OpenRackgateFile(path); !db.ok()) return db.status();
  auto conn = SqliteConnection::Open(path, 5000, /*read_only=*/false);
  if (!conn.ok()) return conn.status();
  if (Status s = Migrate(conn->get(), LatestSchemaVersion()); !s.ok()) return s;
  return Guard([&]() -> Result<AuditChainReport> {
    Connection& c = **conn;
    Transaction txn(&c, Transaction::Kind::kWrite);
    AuditDetail detail;
    detail.Text("archive", record.archive)
        .Text("created_at", record.created_at)
        .Text("rackgate_version", record.rackgate_version)
        .Object("restored_head", AuditDetail().Int("id", record.head_id).Text("hash", record.head_hash));
    AuditRow row;
    row.action = "backup_restored";
    row.detail = DetailJson(detail);
    WriteAudit(c, Actor{actor, "restored from a backup"}, now, row);
    txn.Commit();
    Stmt s = c.Prepare("SELECT id, hash FROM audit ORDER BY id DESC LIMIT 1");
    AuditChainReport head;
    if (s.Step()) {
      head.head_id = s.Int(0);
      head.head_hash = s.Text(1);
    }
    return head;
  });
}

Result<int> SqliteFileSchemaVersion(const std::string& path) {
  auto db = OpenRackgateFile(path);
  if (!db.ok()) return db.status();
  return UserVersion(db->get(), path);
}

}  // namespace rackgate::storage
