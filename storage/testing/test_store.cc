// The store a test runs against (test_store.h).
#include "storage/testing/test_store.h"

#include <stdlib.h>

#include <cstdio>
#include <functional>
#include <mutex>
#include <string_view>

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

// Creates database `name` on the server of `admin_url`, a copy of the
// migrated template, unless it exists. Names are "t_" and hex digits:
// nothing to quote.
Status EnsureDatabase(const std::string& admin_url, const std::string& name) {
  static std::mutex mu;  // one test process creates one database at a time
  std::lock_guard<std::mutex> lock(mu);
  auto admin = PgConnection::Open(admin_url, StoreOptions{}, /*read_only=*/false);
  if (!admin.ok()) return admin.status();
  return Guard([&]() -> Status {
    if (Exists(admin->get(), name)) return Status::Ok();
    if (!Exists(admin->get(), kTemplate)) {
      Create(admin->get(), std::string("CREATE DATABASE ") + kTemplate);
      // Migrated, then closed: a template cannot be copied while in use.
      auto store = PostgresStore::Open(WithDatabase(admin_url, kTemplate), StoreOptions{});
      if (!store.ok()) return store.status();
    }
    Create(admin->get(), "CREATE DATABASE " + name + " TEMPLATE " + kTemplate);
    return Status::Ok();
  });
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

Result<std::unique_ptr<Store>> OpenTestStore(const std::string& sqlite_path, const StoreOptions& options) {
  if (!TestingPostgres()) return Store::Open(sqlite_path, options);
  if (auto why = BackendUnavailable()) return Status::Unsupported("db_backend_unsupported", *why);
  char name[32];
  std::snprintf(name, sizeof(name), "t_%016zx", std::hash<std::string>{}(sqlite_path));
  const std::string admin_url = getenv("RACKGATE_TEST_POSTGRES");
  if (Status s = EnsureDatabase(admin_url, name); !s.ok()) return s;
  return PostgresStore::Open(WithDatabase(admin_url, name), options);
}

}  // namespace rackgate::storage::testing
