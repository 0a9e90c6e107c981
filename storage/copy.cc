// Copying a stopped appliance's SQLite store into an empty database
// (docs/ha.md, "Moving an appliance from SQLite to PostgreSQL"). Driven by the source's schema: the tables in
// foreign-key order, each table's columns as SQLite lists them, each value
// bound by its column's type through the SQL seam, so a new table or column
// is copied without a change here.
#include "storage/copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

#include "storage/audit.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/store.h"

#include "storage/postgres.h"
#include "storage/schema_postgres.h"

namespace rackgate::storage {

namespace {

constexpr std::string_view kSqlitePrefix = "sqlite:";

// The audit chain's columns in the order WalkAuditChain reads them.
constexpr char kAuditRows[] =
    "SELECT id, at, actor, action, machine_id, hostname, from_state, to_state, why, detail_json, prev_hash, hash "
    "FROM audit ORDER BY id";

enum class ColumnType { kInteger, kText, kBlob };

struct Column {
  std::string name;
  ColumnType type;
};

struct Table {
  std::string name;
  std::vector<Column> columns;
  std::vector<std::string> primary_key;  // in key order; ORDER BY for a stable copy
  int64_t rows = 0;
};

// A name as an SQL identifier. Names come from the source's own schema;
// quoting keeps words like "at" and "type" safe in both databases.
std::string Quote(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

// The source's tables (not SQLite's own), parents before the tables whose
// foreign keys name them, otherwise by name.
std::vector<std::string> TablesInForeignKeyOrder(Connection& src) {
  std::vector<std::string> names;
  {
    Stmt s = src.Prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
    while (s.Step()) names.push_back(s.Text(0));
  }
  std::map<std::string, std::set<std::string>> parents;
  for (const auto& t : names) {
    Stmt s = src.Prepare("SELECT \"table\" FROM pragma_foreign_key_list(?1)");
    s.BindText(1, t);
    while (s.Step()) {
      if (s.Text(0) != t) parents[t].insert(s.Text(0));
    }
  }
  std::vector<std::string> order;
  std::set<std::string> placed;
  while (order.size() < names.size()) {
    bool progressed = false;
    for (const auto& t : names) {
      if (placed.count(t) != 0) continue;
      const auto& p = parents[t];
      if (std::all_of(p.begin(), p.end(), [&](const std::string& x) { return placed.count(x) != 0; })) {
        order.push_back(t);
        placed.insert(t);
        progressed = true;
      }
    }
    if (!progressed) {
      Fail(Status::Corruption("db_corrupt", "the source's foreign keys form a cycle (or name a missing table); "
                                            "this is no rackgate schema"));
    }
  }
  return order;
}

Table DescribeTable(Connection& src, const std::string& name) {
  Table t;
  t.name = name;
  std::vector<std::pair<int64_t, std::string>> pk;
  {
    Stmt s = src.Prepare("SELECT name, upper(type), pk FROM pragma_table_info(?1) ORDER BY cid");
    s.BindText(1, name);
    while (s.Step()) {
      Column c{s.Text(0), ColumnType::kInteger};
      const std::string type = s.Text(1);
      if (type == "INTEGER" || type == "INT") {
        c.type = ColumnType::kInteger;
      } else if (type == "TEXT") {
        c.type = ColumnType::kText;
      } else if (type == "BLOB") {
        c.type = ColumnType::kBlob;
      } else {
        Fail(Status::Unsupported("copy_unsupported", "column " + name + "." + c.name + " has type '" + type +
                                                         "', which the copy does not carry (INTEGER, TEXT, BLOB)"));
      }
      if (s.Int(2) > 0) pk.emplace_back(s.Int(2), c.name);
      t.columns.push_back(std::move(c));
    }
  }
  std::sort(pk.begin(), pk.end());
  for (auto& [i, col] : pk) t.primary_key.push_back(col);
  Stmt count = src.Prepare("SELECT count(*) FROM " + Quote(name));
  t.rows = count.Step() ? count.Int(0) : 0;
  return t;
}

int64_t CountRows(Connection& c, const std::string& table) {
  Stmt s = c.Prepare("SELECT count(*) FROM " + Quote(table));
  return s.Step() ? s.Int(0) : 0;
}

AuditChainReport WalkAudit(Connection& c) {
  Stmt s = c.Prepare(kAuditRows);
  return WalkAuditChain(s, std::nullopt);
}

int ReadInt(Connection& c, const char* sql) {
  Stmt s = c.Prepare(sql);
  if (!s.Step()) Fail(Status::IoError("db_error", std::string(sql) + " returned nothing"));
  return static_cast<int>(s.Int(0));
}

// The source must be a rackgate store at this code's schema version: the
// copy writes the latest schema, and only rackgated migrates a file.
int CheckSource(Connection& src) {
  if (ReadInt(src, "PRAGMA application_id") != kApplicationId) {
    Fail(Status::Unsupported("db_not_rackgate", "the source is an SQLite database of something else"));
  }
  const int version = ReadInt(src, "PRAGMA user_version");
  if (version > LatestSchemaVersion()) {
    Fail(Status::Unsupported("db_newer_than_code",
                             "the source has schema version " + std::to_string(version) + ", newer than this "
                                 "rackgate's " + std::to_string(LatestSchemaVersion()) +
                                 "; run the rackgatectl of the rackgate that wrote it"));
  }
  if (version < LatestSchemaVersion()) {
    Fail(Status::Unsupported("db_schema_old",
                             "the source has schema version " + std::to_string(version) + ", older than " +
                                 std::to_string(LatestSchemaVersion()) +
                                 ": start rackgated once to migrate it, then stop it, and run this again"));
  }
  return version;
}

// Copies one table's rows, parameters bound by the column's type.
void CopyRows(Connection& src, Connection& tgt, const Table& t, const CopyOptions& options) {
  std::vector<std::string> names, params;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    names.push_back(Quote(t.columns[i].name));
    params.push_back("?" + std::to_string(i + 1));
  }
  std::string select = "SELECT " + Join(names) + " FROM " + Quote(t.name);
  if (!t.primary_key.empty()) {
    std::vector<std::string> keys;
    for (const auto& k : t.primary_key) keys.push_back(Quote(k));
    select += " ORDER BY " + Join(keys);
  }
  // PostgreSQL refuses explicit values for a GENERATED ALWAYS identity
  // column unless told; the ids are the source's and must be kept.
  const std::string insert = "INSERT INTO " + Quote(t.name) + " (" + Join(names) + ") " +
                             (tgt.dialect() == Dialect::kPostgres ? "OVERRIDING SYSTEM VALUE " : "") + "VALUES (" +
                             Join(params) + ")";
  if (options.progress) options.progress(t.name, 0, t.rows);
  int64_t done = 0;
  Stmt rows = src.Prepare(select);
  Stmt ins = tgt.Prepare(insert);
  while (rows.Step()) {
    for (size_t i = 0; i < t.columns.size(); ++i) {
      const int col = static_cast<int>(i);
      const int param = col + 1;
      if (rows.IsNull(col)) {
        ins.BindNull(param);
        continue;
      }
      switch (t.columns[i].type) {
        case ColumnType::kInteger:
          ins.BindInt(param, rows.Int(col));
          break;
        case ColumnType::kText:
          ins.BindText(param, rows.Text(col));
          break;
        case ColumnType::kBlob:
          ins.BindBlob(param, rows.Blob(col));
          break;
      }
    }
    ins.Run();
    ++done;
    if (options.progress && options.progress_every > 0 && done % options.progress_every == 0 && done < t.rows) {
      options.progress(t.name, done, t.rows);
    }
  }
  if (options.progress) options.progress(t.name, done, t.rows);
}

// SQLite (the stand-in target of tests) has no session_replication_role:
// its triggers are dropped for the copy and created again from their own
// text, in the same transaction.
std::vector<std::pair<std::string, std::string>> DropSqliteTriggers(Connection& tgt) {
  std::vector<std::pair<std::string, std::string>> triggers;
  {
    Stmt s = tgt.Prepare("SELECT name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name");
    while (s.Step()) triggers.emplace_back(s.Text(0), s.Text(1));
  }
  for (const auto& [name, sql] : triggers) tgt.Exec(("DROP TRIGGER " + Quote(name)).c_str());
  return triggers;
}

bool SameHead(const AuditChainReport& a, const AuditChainReport& b) {
  return a.rows == b.rows && a.head_id == b.head_id && a.head_hash == b.head_hash && a.intact == b.intact;
}

// The target's connection, its schema created when absent.
Result<std::unique_ptr<Connection>> OpenTarget(const std::string& target) {
  if (IsPostgresUrl(target)) {
    auto conn = PgConnection::Open(target, StoreOptions{}, false);
    if (!conn.ok()) return conn.status();
    if (Status s = MigratePostgres(conn->get()); !s.ok()) return s;
    return std::unique_ptr<Connection>(std::move(conn).value());
  }
  const std::string path = target.starts_with(kSqlitePrefix) ? target.substr(kSqlitePrefix.size()) : target;
  {
    // Creates the file (0600, WAL) and its schema, as rackgated would.
    auto store = Store::Open(path);
    if (!store.ok()) return store.status();
  }
  auto conn = SqliteConnection::Open(path, 5000, false);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<Connection>(std::move(conn).value());
}

}  // namespace

Status CheckSqliteNotInUse(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::Ok();
  const auto held = [](const std::string& file, off_t start, off_t len) -> std::optional<pid_t> {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;  // no -shm: no connection in WAL mode has the file open
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = start;
    fl.l_len = len;
    const int rc = ::fcntl(fd, F_GETLK, &fl);
    ::close(fd);
    if (rc != 0 || fl.l_type == F_UNLCK) return std::nullopt;
    return fl.l_pid;
  };
  // Every connection to a WAL database holds a read lock on the -shm file's
  // "dead man switch" byte (offset 128) for as long as it is open; a
  // transaction in progress also locks the database file's lock bytes (at 1
  // GiB). fcntl locks of this process are not reported: only others count.
  std::optional<pid_t> pid = held(path + "-shm", 128, 1);
  if (!pid) pid = held(path, 0x40000000, 512 + 2);
  if (!pid) return Status::Ok();
  return Status::IoError("db_in_use", path + " is open in process " + std::to_string(*pid) +
                                          " (rackgated?): stop it (`systemctl stop rackgated`) and run this again");
}

Result<CopyReport> CopyDatabase(Connection& source, Connection& target, const CopyOptions& options) {
  return Guard([&]() -> Result<CopyReport> {
    if (source.dialect() != Dialect::kSqlite) {
      return Status::Unsupported("copy_unsupported", "the copy reads an SQLite store only");
    }
    CopyReport report;
    report.dry_run = options.dry_run;
    Transaction read(&source, Transaction::Kind::kRead);
    report.schema_version = CheckSource(source);
    std::vector<Table> tables;
    for (const auto& name : TablesInForeignKeyOrder(source)) tables.push_back(DescribeTable(source, name));
    report.source_audit = WalkAudit(source);

    Transaction write(&target, Transaction::Kind::kWrite);
    // Nothing is merged: a target that holds anything is refused before a
    // row is written.
    for (const auto& t : tables) {
      if (const int64_t n = CountRows(target, t.name); n > 0) {
        return Status::Unsupported("target_not_empty",
                                   "the target's table " + t.name + " holds " + std::to_string(n) +
                                       " row(s); the copy goes into an empty database only: give a new database "
                                       "(CREATE DATABASE), or drop this one's rackgate tables if it is a failed "
                                       "earlier copy");
      }
    }
    std::vector<std::pair<std::string, std::string>> sqlite_triggers;
    if (target.dialect() == Dialect::kPostgres) {
      // The events rows are copied, not made again: under the replica role
      // PostgreSQL fires no ordinary trigger, so inserting audit and
      // attestations rows does not write their events a second time (nor
      // fan them out into deliveries). SET LOCAL ends with the transaction.
      try {
        target.Exec("SET LOCAL session_replication_role = replica");
      } catch (const StoreError& e) {
        return Status::Unsupported(
            "copy_unsupported", "the target refused SET session_replication_role (" + e.status().message() +
                                    "); as a superuser run `GRANT SET ON PARAMETER session_replication_role TO <role>` "
                                    "for the role in the URL, or migrate as a superuser");
      }
    } else {
      sqlite_triggers = DropSqliteTriggers(target);
    }
    for (const auto& t : tables) CopyRows(source, target, t, options);
    for (const auto& [name, sql] : sqlite_triggers) target.Exec(sql.c_str());
    // Identity sequences past the copied ids, so the next insert gets a
    // fresh one.
    if (target.dialect() == Dialect::kPostgres) {
      if (Status st = ResetPostgresIdentities(&target); !st.ok()) Fail(st);
    }

    // Checked in the copy's transaction: a difference rolls everything back.
    for (const auto& t : tables) {
      const int64_t n = CountRows(target, t.name);
      report.tables.push_back({t.name, t.rows, n});
      if (n != t.rows) {
        return Status::Corruption("copy_mismatch", "table " + t.name + ": " + std::to_string(t.rows) +
                                                       " row(s) in the source, " + std::to_string(n) +
                                                       " in the target; nothing was written");
      }
    }
    report.target_audit = WalkAudit(target);
    if (!SameHead(report.source_audit, report.target_audit)) {
      return Status::Corruption(
          "copy_mismatch", "the audit chain differs on the target (source head " +
                               std::to_string(report.source_audit.head_id) + ":" + report.source_audit.head_hash +
                               ", target head " + std::to_string(report.target_audit.head_id) + ":" +
                               report.target_audit.head_hash + "); nothing was written");
    }
    if (options.dry_run) {
      target.RollbackQuietly();
    } else {
      write.Commit();
    }
    return report;
  });
}

Result<CopyReport> CopyDatabase(const std::string& source_path, const std::string& target,
                                const CopyOptions& options) {
  if (Status s = CheckSqliteNotInUse(source_path); !s.ok()) return s;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(source_path, ec)) {
    return Status::NotFound("db_missing", "no SQLite store at " + source_path +
                                              ": give the appliance's database with --from PATH or its state "
                                              "directory with --state-dir DIR");
  }
  auto source = SqliteConnection::Open(source_path, 5000, true);
  if (!source.ok()) return source.status();
  auto tgt = OpenTarget(target);
  if (!tgt.ok()) return tgt.status().Annotate("target");
  return CopyDatabase(**source, **tgt, options);
}

}  // namespace rackgate::storage
