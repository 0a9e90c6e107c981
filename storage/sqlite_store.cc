// The SQLite store's life: opening (WAL, migrations), write statistics and
// online backups.
#include "storage/sql_store.h"
#include "storage/sqlite.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "storage/schema.h"

namespace rackgate::storage {

Result<std::unique_ptr<Store>> SqliteStore::Open(const std::string& path, const StoreOptions& options) {
  if (path.empty() || path == ":memory:" || path.front() == '\0') {
    return Status::InvalidArgument("field_invalid", "the database needs a file path");
  }
  if (sqlite3_threadsafe() == 0) {
    return Status::IoError("db_error", "this SQLite library is built without thread support");
  }
  // The file holds no secret, but EK and token hashes and the audit log are
  // nobody else's business: 0600 when we create it. SQLite gives the -wal and
  // -shm files the database file's mode.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Status::IoError("db_error", "open " + path + ": " + std::strerror(errno));
  ::close(fd);

  auto writer = SqliteConnection::Open(path, options.busy_timeout_ms, /*read_only=*/false);
  if (!writer.ok()) return writer.status();
  try {
    // WAL: readers never block the writer and the writer never blocks readers.
    Stmt s = (*writer)->Prepare("PRAGMA journal_mode = WAL");
    if (!s.Step() || s.Text(0) != "wal") {
      return Status::IoError("db_error", "open " + path + ": the database cannot use WAL mode");
    }
  } catch (const StoreError& e) {
    return e.status();
  }
  if (Status s = Migrate(writer->get(), LatestSchemaVersion()); !s.ok()) return s;
  const int busy_timeout_ms = options.busy_timeout_ms;
  Database::Opener open = [path, busy_timeout_ms](bool read_only) -> Result<std::unique_ptr<Connection>> {
    auto conn = SqliteConnection::Open(path, busy_timeout_ms, read_only);
    if (!conn.ok()) return conn.status();
    return std::unique_ptr<Connection>(std::move(conn).value());
  };
  // Every reader of a burst stays open (max_idle_readers unset: all of
  // them), as on PostgreSQL: opening a SQLite connection reads and parses
  // the schema and prepares each statement again. With 8 kept, a storm of
  // 200 at a time reopened readers for 6% of rackgated's CPU
  // (docs/storage.md, "Statements and writes per machine").
  return std::unique_ptr<Store>(new SqliteStore(
      path,
      std::make_unique<Database>(options, std::move(open), std::unique_ptr<Connection>(std::move(writer).value()))));
}

Status SqliteStore::Backup(const std::string& dest_path) {
  return Guard([&]() -> Status {
    if (dest_path.empty()) return Status::InvalidArgument("field_invalid", "the backup needs a file path");
    if (::access(dest_path.c_str(), F_OK) == 0) {
      return Status::InvalidArgument("field_invalid", "the backup destination " + dest_path + " exists");
    }
    // A connection of its own: VACUUM INTO reads one snapshot and writes a
    // complete, self-contained database file while the others keep working.
    auto conn = SqliteConnection::Open(path_, db_->options().busy_timeout_ms, /*read_only=*/false);
    if (!conn.ok()) return conn.status();
    Stmt s = (*conn)->Prepare("VACUUM INTO ?1");
    s.BindText(1, dest_path).Run();
    return Status::Ok();
  });
}

}  // namespace rackgate::storage
