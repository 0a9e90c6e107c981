// The store a test runs against (test_store.h).
#include "storage/testing/test_store.h"

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "storage/postgres.h"
#include "storage/sql_store.h"

namespace rackgate::storage::testing {

namespace {

// `url` with its database name replaced by `dbname` (a postgresql:// URI:
// the path after the authority; its query, if any, is kept).
std::string WithDatabase(const std::string& url, const std::string& dbname) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return url + " dbname=" + dbname;  // key=value form
  const size_t path = url.find_first_of("/?", scheme + 3);
  if (path == std::string::npos) return url + "/" + dbname;
  if (url[path] == '?') return url.substr(0, path) + "/" + dbname + url.substr(path);
  const size_t query = url.find('?', path);
  return url.substr(0, path) + "/" + dbname + (query == std::string::npos ? "" : url.substr(query));
}

// The migrated, empty database that each test's database is copied from:
// CREATE DATABASE ... TEMPLATE takes half a second, migrating anew a second
// more.
constexpr char kTemplate[] = "t_rackgate_template";

bool Exists(Connection* admin, const std::string& name) {
  Stmt s = admin->Prepare("SELECT 1 FROM pg_database WHERE datname = ?1");
  s.BindText(1, name);
  const bool found = s.Step();
  s.Run();
  return found;
}

// CREATE DATABASE, where another test process may have created it first
// (42P04, or 23505 while both inserted into pg_database).
void Create(Connection* admin, const std::string& sql) {
  try {
    admin->Exec(sql.c_str());
  } catch (const StoreError& e) {
    if (e.status().message().find("42P04") == std::string::npos &&
        e.status().message().find("23505") == std::string::npos) {
      throw;
    }
  }
}

// --- Databases used again --------------------------------------------------
//
// A test's database is a copy of the template (CREATE DATABASE ... TEMPLATE:
// 0.2-0.7 s, most of a small test's time on PostgreSQL). Once the test that
// owned a database has ended (its scratch path's directory is gone) and
// nobody is connected to it, the next test of the same process gets it
// emptied instead, renamed after its own path: every row deleted and every
// sequence restarted, in one transaction, after a check that its schema is
// still the template's (a test may have changed tables, triggers or the
// schema version; such a database is left alone). Any failure on the way
// falls back to a new copy.

// Everything of a database's schema that a test could change, as one hash:
// relations (kind, privileges, row security), columns, defaults,
// constraints, indexes, triggers (with their enabled state), functions,
// sequences, comments, schemas, extensions, the database's settings, large
// objects, and the schema version row.
constexpr char kFingerprint[] = R"(SELECT md5(string_agg(x, E'\n' ORDER BY x)) FROM (
  SELECT 'rel ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(c.relacl::text, '') || ' ' ||
         c.relrowsecurity::text
    FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'col ' || c.relname || ' ' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' ||
         a.attnotnull::text || ' ' || a.attidentity::text || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
    FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
  UNION ALL
  SELECT 'con ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
    WHERE connamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'idx ' || indexdef FROM pg_indexes WHERE schemaname = 'public'
  UNION ALL
  SELECT 'trg ' || tgname || ' ' || tgenabled::text || ' ' || pg_get_triggerdef(oid) FROM pg_trigger WHERE NOT tgisinternal
  UNION ALL
  SELECT 'fn ' || proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'seq ' || sequencename || ' ' || start_value || ' ' || increment_by FROM pg_sequences
    WHERE schemaname = 'public'
  UNION ALL
  SELECT 'cmt ' || c.relname || ' ' || d.description FROM pg_description d JOIN pg_class c ON c.oid = d.objoid
    WHERE d.classoid = 'pg_class'::regclass AND d.objsubid = 0 AND c.relnamespace = 'public'::regnamespace
  UNION ALL
  SELECT 'ns ' || nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
  UNION ALL
  SELECT 'ext ' || extname || ' ' || extversion FROM pg_extension
  UNION ALL
  SELECT 'set ' || array_to_string(setconfig, ',') FROM pg_db_role_setting
    WHERE setdatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
  UNION ALL
  SELECT 'lo ' || count(*) FROM pg_largeobject_metadata
  UNION ALL
  SELECT 'ver ' || version FROM rackgate_schema
) f(x))";

// The statements that empty a database copied from the template, in one
// transaction: as a replica would (session_replication_role; a superuser's
// setting, which pg-lab's user is), so that no trigger fires, neither
// audit's append-only guard nor a foreign key's; then the sequences back
// at their start.
std::string EmptyingSql(Connection* c) {
  std::string sql = "BEGIN; SET LOCAL session_replication_role = replica; SET LOCAL lock_timeout = '2s'; ";
  Stmt tables = c->Prepare(
      "SELECT format('DELETE FROM %I; ', relname) FROM pg_class "
      "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND relname <> 'rackgate_schema' "
      "ORDER BY relname");
  while (tables.Step()) sql += tables.Text(0);
  tables.Run();
  Stmt sequences = c->Prepare(
      "SELECT format('ALTER SEQUENCE %I RESTART; ', sequencename) FROM pg_sequences "
      "WHERE schemaname = 'public' ORDER BY sequencename");
  while (sequences.Step()) sql += sequences.Text(0);
  sequences.Run();
  return sql + "COMMIT;";
}

std::string Fingerprint(Connection* c) {
  Stmt s = c->Prepare(kFingerprint);
  const std::string f = s.Step() ? s.Text(0) : "";
  s.Run();
  return f;
}

// True when every table but rackgate_schema is empty.
bool NoRows(Connection* c) {
  Stmt tables = c->Prepare(
      "SELECT format('SELECT count(*) FROM %I', relname) FROM pg_class "
      "WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p') AND relname <> 'rackgate_schema'");
  std::vector<std::string> counts;
  while (tables.Step()) counts.push_back(tables.Text(0));
  tables.Run();
  for (const std::string& q : counts) {
    Stmt n = c->Prepare(q);
    const bool empty = n.Step() && n.Int(0) == 0;
    n.Run();
    if (!empty) return false;
  }
  return true;
}

struct Made {
  std::string path;  // the scratch path the database belongs to
  std::string name;
};

// Guarded by EnsureDatabase's mutex.
struct Recycler {
  std::vector<Made> made;        // databases this process made or renamed, whose path's directory existed
  std::string fresh_fingerprint;  // of a fresh copy of the template; "" until one was taken
  bool enabled = true;           // off once a fresh copy was not empty (a template with rows)
};

Recycler& TheRecycler() {
  static Recycler r;
  return r;
}

bool DirectoryOf(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(std::filesystem::path(path).parent_path(), ec);
}

// Waits (at most a second: a closed connection's server process ends a
// moment after the client let go) until nobody is connected to `name`.
bool Unused(Connection* admin, const std::string& name) {
  for (int i = 0; i < 50; ++i) {
    Stmt s = admin->Prepare("SELECT count(*) FROM pg_stat_activity WHERE datname = ?1");
    s.BindText(1, name);
    const bool idle = s.Step() && s.Int(0) == 0;
    s.Run();
    if (idle) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The fingerprint of database `name`, a fresh copy of the template, and
// whether databases may be used again at all.
void Observe(const std::string& admin_url, const std::string& name) {
  Recycler& r = TheRecycler();
  if (!r.fresh_fingerprint.empty() || !r.enabled) return;
  auto c = PgConnection::Open(WithDatabase(admin_url, name), StoreOptions{}, /*read_only=*/true);
  if (!c.ok()) return;
  const Status s = Guard([&]() -> Status {
    if (!NoRows(c->get())) {
      r.enabled = false;
    } else {
      r.fresh_fingerprint = Fingerprint(c->get());
    }
    return Status::Ok();
  });
  if (!s.ok()) r.enabled = false;
}

// Empties a database whose test has ended and renames it `name`; false
// (nothing renamed) when there is none or anything fails.
bool Recycle(Connection* admin, const std::string& admin_url, const std::string& name) {
  Recycler& r = TheRecycler();
  if (!r.enabled || r.fresh_fingerprint.empty()) return false;
  for (auto it = r.made.begin(); it != r.made.end(); ++it) {
    if (DirectoryOf(it->path)) continue;  // its test still runs
    const std::string old = it->name;
    r.made.erase(it);  // used again below, or never
    if (!Unused(admin, old)) return false;
    {
      auto c = PgConnection::Open(WithDatabase(admin_url, old), StoreOptions{}, /*read_only=*/false);
      if (!c.ok()) return false;
      const Status s = Guard([&]() -> Status {
        if (Fingerprint(c->get()) != r.fresh_fingerprint) {
          return Status::Unsupported("schema_changed", "the test changed the schema");
        }
        c->get()->Exec(EmptyingSql(c->get()).c_str());
        if (!NoRows(c->get())) return Status::Unsupported("not_empty", "rows are left");
        return Status::Ok();
      });
      if (!s.ok()) return false;
    }
    if (!Unused(admin, old)) return false;
    return Guard([&]() -> Status {
             admin->Exec(("ALTER DATABASE " + old + " RENAME TO " + name).c_str());
             return Status::Ok();
           })
        .ok();
  }
  return false;
}

// Creates database `name` on the server of `admin_url` for the scratch
// path `path`, a copy of the migrated template (or an emptied database of
// an ended test: above), unless it exists. Names are "t_" and hex digits:
// nothing to quote.
Status EnsureDatabase(const std::string& admin_url, const std::string& name, const std::string& path) {
  static std::mutex mu;  // one test process creates one database at a time
  std::lock_guard<std::mutex> lock(mu);
  auto admin = PgConnection::Open(admin_url, StoreOptions{}, /*read_only=*/false);
  if (!admin.ok()) return admin.status();
  bool made = false;
  const Status s = Guard([&]() -> Status {
    if (Exists(admin->get(), name)) return Status::Ok();
    if (Recycle(admin->get(), admin_url, name)) {
      made = true;
      return Status::Ok();
    }
    if (!Exists(admin->get(), kTemplate)) {
      Create(admin->get(), std::string("CREATE DATABASE ") + kTemplate);
      // Migrated, then closed: a template cannot be copied while in use.
      auto store = PostgresStore::Open(WithDatabase(admin_url, kTemplate), StoreOptions{});
      if (!store.ok()) return store.status();
    }
    Create(admin->get(), "CREATE DATABASE " + name + " TEMPLATE " + kTemplate);
    Observe(admin_url, name);
    made = true;
    return Status::Ok();
  });
  // Only a path in a directory can say its test has ended.
  if (s.ok() && made && DirectoryOf(path)) TheRecycler().made.push_back(Made{path, name});
  return s;
}

}  // namespace

bool TestingPostgres() {
  const char* v = getenv("RACKGATE_TEST_STORE");
  return v != nullptr && std::string_view(v) == "postgresql";
}

std::optional<std::string> BackendUnavailable() {
  if (!TestingPostgres()) return std::nullopt;
  const char* url = getenv("RACKGATE_TEST_POSTGRES");
  if (url == nullptr || *url == '\0') {
    return "PostgreSQL is not installed (apt-get install postgresql): RACKGATE_TEST_POSTGRES is unset";
  }
  return std::nullopt;
}

Result<std::string> TestDatabaseUrl(const std::string& sqlite_path) {
  if (auto why = BackendUnavailable()) return Status::Unsupported("db_backend_unsupported", *why);
  char name[32];
  std::snprintf(name, sizeof(name), "t_%016zx", std::hash<std::string>{}(sqlite_path));
  const std::string admin_url = getenv("RACKGATE_TEST_POSTGRES");
  if (Status s = EnsureDatabase(admin_url, name, sqlite_path); !s.ok()) return s;
  return WithDatabase(admin_url, name);
}

Result<std::unique_ptr<Store>> OpenTestStore(const std::string& sqlite_path, const StoreOptions& options) {
  if (!TestingPostgres()) return Store::Open(sqlite_path, options);
  auto url = TestDatabaseUrl(sqlite_path);
  if (!url.ok()) return url.status();
  return PostgresStore::Open(*url, options);
}

}  // namespace rackgate::storage::testing
