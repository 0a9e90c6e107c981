// Tests for the PostgreSQL schema and its migrations, against a real server
// (script/pg-lab run): an empty database migrated, again as a no-op, newer
// and foreign databases refused, racing appliances, the append-only audit,
// the events triggers (compared with SQLite's), NOTIFY.
#include "storage/schema_postgres.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "storage/postgres.h"
#include "storage/schema.h"
#include "storage/sqlite.h"
#include "storage/testing/test_util.h"

namespace rackgate::storage {
namespace {

using testing::TempDir;

// The server pg-lab started, or "" (the tests then skip).
std::string ServerUrl() {
  const char* url = getenv("RACKGATE_TEST_POSTGRES");
  return url != nullptr ? url : "";
}

// `url` with its database name replaced by `db`.
std::string WithDatabase(const std::string& url, const std::string& db) {
  const size_t hosts = url.find("://");
  const size_t slash = url.find('/', hosts == std::string::npos ? 0 : hosts + 3);
  const size_t query = url.find('?');
  const std::string tail = query == std::string::npos ? "" : url.substr(query);
  return url.substr(0, slash) + "/" + db + tail;
}

// A raw libpq connection, for what the seam does not do (LISTEN, CREATE
// DATABASE) and for looking at the database from outside.
PgConnPtr Raw(const std::string& url) {
  PgConnPtr c(PQconnectdb(url.c_str()));
  EXPECT_EQ(PQstatus(c.get()), CONNECTION_OK) << PQerrorMessage(c.get());
  return c;
}

// Runs `sql`; the first column of the first row, "" without rows, or the
// error message prefixed with "ERROR: ".
std::string RawQuery(PGconn* c, const std::string& sql) {
  PgResultPtr r(PQexec(c, sql.c_str()));
  const ExecStatusType st = PQresultStatus(r.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) return std::string("ERROR: ") + PQresultErrorMessage(r.get());
  if (st == PGRES_COMMAND_OK || PQntuples(r.get()) == 0) return "";
  return PQgetvalue(r.get(), 0, 0);
}

std::unique_ptr<Connection> OpenPg(const std::string& url) {
  auto c = PgConnection::Open(url, StoreOptions{}, /*read_only=*/false);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  return std::move(c).value();
}

// A migrated SQLite database in `dir`, to compare with.
std::unique_ptr<SqliteConnection> OpenSqlite(const TempDir& dir) {
  const std::string path = dir.File("compare.db");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  EXPECT_GE(fd, 0);
  ::close(fd);
  auto c = SqliteConnection::Open(path, 1000, false);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return nullptr;
  Status s = Migrate(c->get(), LatestSchemaVersion());
  EXPECT_TRUE(s.ok()) << s.ToString();
  return std::move(c).value();
}

int64_t QueryInt(Connection* c, const std::string& sql) {
  Stmt s = c->Prepare(sql);
  EXPECT_TRUE(s.Step()) << sql;
  return s.Int(0);
}

// Every row of `sql`, each as its columns joined by '|' (NULL as "~").
std::vector<std::string> Rows(Connection* c, const std::string& sql, int columns) {
  std::vector<std::string> out;
  Stmt s = c->Prepare(sql);
  while (s.Step()) {
    std::string row;
    for (int i = 0; i < columns; ++i) {
      if (i > 0) row += "|";
      row += s.IsNull(i) ? "~" : s.Text(i);
    }
    out.push_back(row);
  }
  return out;
}

class PostgresSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = ServerUrl();
    if (server_.empty()) {
      GTEST_SKIP() << "RACKGATE_TEST_POSTGRES is unset: no PostgreSQL server; run under `script/pg-lab run --` "
                      "(meson test does), with postgresql and libpq-dev installed (script/bootstrap)";
    }
    // A database of the test's own, so that each test starts empty.
    static std::atomic<int> counter{0};
    db_ = "schema_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
    admin_ = Raw(server_);
    ASSERT_EQ(RawQuery(admin_.get(), "CREATE DATABASE " + db_), "");
    url_ = WithDatabase(server_, db_);
  }
  void TearDown() override {
    if (admin_) RawQuery(admin_.get(), "DROP DATABASE IF EXISTS " + db_ + " WITH (FORCE)");
  }

  std::string server_;
  std::string db_;
  std::string url_;
  PgConnPtr admin_;
};

TEST_F(PostgresSchemaTest, MigratesAnEmptyDatabase) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(PostgresSchemaVersion(c.get()).value(), 0);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  EXPECT_EQ(PostgresSchemaVersion(c.get()).value(), LatestPostgresSchemaVersion());
  EXPECT_EQ(LatestPostgresSchemaVersion(), static_cast<int>(PostgresMigrations().size()));

  // Every table SQLite's latest schema has, and rackgate_schema.
  std::set<std::string> sqlite_tables;
  {
    TempDir dir;
    auto lite = OpenSqlite(dir);
    ASSERT_NE(lite, nullptr);
    for (const std::string& t : Rows(lite.get(),
                                     "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE "
                                     "'sqlite_%' ORDER BY name",
                                     1)) {
      sqlite_tables.insert(t);
    }
  }
  std::set<std::string> pg_tables;
  for (const std::string& t :
       Rows(c.get(), "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename", 1)) {
    pg_tables.insert(t);
  }
  // Column for column, in the same order, nullable where SQLite's are (a
  // primary key column aside: SQLite's INTEGER PRIMARY KEY may be NULL on
  // paper); certificates has SQLite's implicit rowid at its end.
  std::map<std::string, std::vector<std::string>> sqlite_columns;
  {
    TempDir dir;
    auto lite = OpenSqlite(dir);
    ASSERT_NE(lite, nullptr);
    for (const std::string& t : sqlite_tables) {
      sqlite_columns[t] = Rows(lite.get(),
                               "SELECT name || CASE WHEN \"notnull\" OR pk > 0 THEN ' not null' ELSE '' END "
                               "FROM pragma_table_info('" + t + "') ORDER BY cid",
                               1);
    }
  }
  sqlite_columns["certificates"].push_back("rowid not null");
  for (const auto& [table, columns] : sqlite_columns) {
    EXPECT_EQ(Rows(c.get(),
                   "SELECT column_name || CASE WHEN is_nullable = 'NO' THEN ' not null' ELSE '' END FROM "
                   "information_schema.columns WHERE table_schema = current_schema() AND table_name = '" + table +
                       "' ORDER BY ordinal_position",
                   1),
              columns)
        << table;
  }
  sqlite_tables.insert("rackgate_schema");
  EXPECT_EQ(pg_tables, sqlite_tables);

  PgConnPtr raw = Raw(url_);
  EXPECT_EQ(RawQuery(raw.get(), "SELECT obj_description('rackgate_schema'::regclass, 'pg_class')"),
            kPostgresSchemaComment);
  // Text sorts by bytes, as SQLite's BINARY collation does.
  ASSERT_EQ(RawQuery(raw.get(), "INSERT INTO pools (name, created_at, updated_at) VALUES ('b', 1, 1), ('B', 1, 1), "
                                "('a', 1, 1), ('_', 1, 1)"),
            "");
  EXPECT_EQ(Rows(c.get(), "SELECT name FROM pools ORDER BY name", 1),
            (std::vector<std::string>{"B", "_", "a", "b"}));
}

TEST_F(PostgresSchemaTest, MigratingAgainIsANoOp) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  PgConnPtr raw = Raw(url_);
  ASSERT_EQ(RawQuery(raw.get(), "INSERT INTO pools (name, created_at, updated_at) VALUES ('p', 1, 1)"), "");
  const std::string tables_before = RawQuery(raw.get(), "SELECT count(*) FROM pg_class");

  auto again = OpenPg(url_);
  ASSERT_NE(again, nullptr);
  Status s = MigratePostgres(again.get());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(PostgresSchemaVersion(again.get()).value(), LatestPostgresSchemaVersion());
  EXPECT_EQ(RawQuery(raw.get(), "SELECT count(*) FROM pg_class"), tables_before);
  EXPECT_EQ(RawQuery(raw.get(), "SELECT count(*) FROM pools"), "1");
  EXPECT_EQ(RawQuery(raw.get(), "SELECT count(*) FROM rackgate_schema"), "1");
}

TEST_F(PostgresSchemaTest, RefusesANewerDatabase) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  const int newer = LatestPostgresSchemaVersion() + 1;
  PgConnPtr raw = Raw(url_);
  ASSERT_EQ(RawQuery(raw.get(), "UPDATE rackgate_schema SET version = " + std::to_string(newer)), "");

  auto next = OpenPg(url_);
  ASSERT_NE(next, nullptr);
  Status s = MigratePostgres(next.get());
  EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.ToString();
  EXPECT_EQ(s.reason(), "db_newer_than_code");
  EXPECT_NE(s.message().find("restore a backup"), std::string::npos) << s.message();
  EXPECT_EQ(RawQuery(raw.get(), "SELECT version FROM rackgate_schema"), std::to_string(newer));
}

TEST_F(PostgresSchemaTest, RefusesADatabaseOfSomethingElse) {
  PgConnPtr raw = Raw(url_);
  ASSERT_EQ(RawQuery(raw.get(), "CREATE TABLE customers (id BIGINT)"), "");
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  Status s = MigratePostgres(c.get());
  EXPECT_EQ(s.code(), Status::Code::kUnsupported) << s.ToString();
  EXPECT_EQ(s.reason(), "db_not_rackgate");
  EXPECT_EQ(RawQuery(raw.get(), "SELECT to_regclass('pools') IS NULL AND to_regclass('rackgate_schema') IS NULL"),
            "t");

  // A table of that name is not enough: rackgate's comment names it.
  ASSERT_EQ(RawQuery(raw.get(), "DROP TABLE customers; CREATE TABLE rackgate_schema (version BIGINT); "
                                "INSERT INTO rackgate_schema VALUES (1)"),
            "");
  s = MigratePostgres(c.get());
  EXPECT_EQ(s.reason(), "db_not_rackgate") << s.ToString();
}

// Two appliances starting at once: both wait on the migration lock (held
// here until both have read version 0 and queued), one migrates, the other
// finds the version moved on and does nothing. Both succeed.
TEST_F(PostgresSchemaTest, RacingMigrationsMigrateOnce) {
  PgConnPtr holder = Raw(url_);
  ASSERT_EQ(RawQuery(holder.get(), "BEGIN"), "");
  ASSERT_EQ(RawQuery(holder.get(), "SELECT pg_advisory_xact_lock(" + std::to_string(kPostgresSchemaLockKey) + ")"),
            "");

  constexpr int kAppliances = 3;
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < kAppliances; ++i) {
    conns.push_back(OpenPg(url_));
    ASSERT_NE(conns.back(), nullptr);
  }
  std::vector<Status> results(kAppliances);
  std::vector<std::thread> threads;
  for (int i = 0; i < kAppliances; ++i) {
    threads.emplace_back([&, i] { results[i] = MigratePostgres(conns[i].get()); });
  }
  // Release the lock once every appliance waits on it.
  PgConnPtr watcher = Raw(url_);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline &&
         RawQuery(watcher.get(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") !=
             std::to_string(kAppliances)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(RawQuery(watcher.get(), "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"),
            std::to_string(kAppliances));
  ASSERT_EQ(RawQuery(holder.get(), "COMMIT"), "");
  for (std::thread& t : threads) t.join();

  for (int i = 0; i < kAppliances; ++i) EXPECT_TRUE(results[i].ok()) << i << ": " << results[i].ToString();
  EXPECT_EQ(RawQuery(watcher.get(), "SELECT version FROM rackgate_schema"),
            std::to_string(LatestPostgresSchemaVersion()));
  EXPECT_EQ(RawQuery(watcher.get(), "SELECT count(*) FROM rackgate_schema"), "1");
}

TEST_F(PostgresSchemaTest, AuditIsAppendOnly) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  PgConnPtr raw = Raw(url_);
  ASSERT_EQ(RawQuery(raw.get(), "INSERT INTO audit (id, at, actor, action, why) VALUES (1, 5, 'admin', 'pool_set', "
                                "'kept')"),
            "");
  for (const char* sql : {"UPDATE audit SET why = 'rewritten'", "DELETE FROM audit", "TRUNCATE audit",
                          "TRUNCATE audit CASCADE"}) {
    const std::string got = RawQuery(raw.get(), sql);
    EXPECT_NE(got.find("audit is append-only"), std::string::npos) << sql << ": " << got;
  }
  // Through the seam, too: a failure, not a silent no-op.
  EXPECT_THROW(c->Run("DELETE FROM audit WHERE id = 1"), StoreError);
  EXPECT_EQ(RawQuery(raw.get(), "SELECT why FROM audit WHERE id = 1"), "kept");
  EXPECT_EQ(RawQuery(raw.get(), "SELECT count(*) FROM audit"), "1");
}

// The same statements, in the one SQL text, on a migrated SQLite database and
// on PostgreSQL: the triggers write the same events and deliveries.
TEST_F(PostgresSchemaTest, EventsTriggersMatchSqlite) {
  TempDir dir;
  auto lite = OpenSqlite(dir);
  ASSERT_NE(lite, nullptr);
  auto pg = OpenPg(url_);
  ASSERT_NE(pg, nullptr);
  ASSERT_TRUE(MigratePostgres(pg.get()).ok());

  const std::vector<std::string> kWrites = {
      "INSERT INTO pools (name, created_at, updated_at) VALUES ('workers', 1, 1)",
      "INSERT INTO webhooks (url, types, added_at) VALUES ('https://all', '', 1), "
      "('https://revoked', ',machine_revoked,', 1), "
      "('https://certs', ',certificate_issued,csr_waiting,kubernetes_csr_denied,', 1)",
      // Event actions, and one that is none.
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname, why, detail_json) "
      "VALUES (1, 10, 'uid:0(root)', 'revoke', 1, 'node-1', 'stolen', '{\"k\":1}')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) VALUES (2, 11, 'a', 'trusted', 1, 'node-1')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) VALUES (3, 12, 'a', 'untrusted', 1, 'node-1')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) "
      "VALUES (4, 13, 'a', 'certificate_issued', 1, 'node-1')",
      "INSERT INTO audit (id, at, actor, action) VALUES (5, 14, 'a', 'pool_set')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) VALUES (6, 15, 'a', 'csr_waiting', 99, 'gone')",
      // Approver mode: its decisions are events, a key registered is none.
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname, detail_json) "
      "VALUES (7, 16, 'rackgate', 'kubernetes_csr_approved', 1, 'node-1', '{\"uid\":\"u1\"}')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) "
      "VALUES (8, 17, 'rackgate', 'kubernetes_csr_denied', 1, 'node-1')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) "
      "VALUES (9, 18, 'rackgate', 'kubernetes_csr_waiting', 1, 'node-1')",
      "INSERT INTO audit (id, at, actor, action, machine_id, hostname) "
      "VALUES (10, 19, 'rackgate', 'kubelet_key_registered', 1, 'node-1')",
      // A refused attestation is an event, a good one is not.
      "INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict, reason, reasons_json) "
      "VALUES (1, 0, 's1', 20, 'refused', 'pcr_mismatch', '[\"pcr_mismatch\"]')",
      "INSERT INTO attestations (machine_id, attest_epoch, session_id, at, verdict) VALUES (1, 0, 's2', 21, 'ok')",
  };
  for (Connection* c : std::vector<Connection*>{lite.get(), pg.get()}) {
    // Blobs as parameters: x'..' is a bit string to PostgreSQL.
    c->Run(kWrites[0]);
    c->Prepare("INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, created_at, updated_at) "
               "VALUES ('node-1', 'workers', 'enrolled', ?1, ?2, 1, 1)")
        .BindBlob(1, {1})
        .BindBlob(2, {2})
        .Run();
    for (size_t i = 1; i < kWrites.size(); ++i) c->Run(kWrites[i]);
  }
  const std::string kEvents =
      "SELECT id, at, type, machine_id, hostname, pool, actor, why, detail_json, attestation_id, reason, "
      "reasons_json FROM events ORDER BY id";
  const std::string kDeliveries =
      "SELECT event_id, webhook, attempts, next_attempt_at, delivered_at, last_error FROM event_deliveries "
      "ORDER BY event_id, webhook";
  const auto lite_events = Rows(lite.get(), kEvents, 12);
  EXPECT_EQ(lite_events.size(), 9u);
  EXPECT_EQ(Rows(pg.get(), kEvents, 12), lite_events);
  const auto lite_deliveries = Rows(lite.get(), kDeliveries, 6);
  EXPECT_EQ(lite_deliveries.size(), 13u);
  EXPECT_EQ(Rows(pg.get(), kDeliveries, 6), lite_deliveries);
  EXPECT_EQ(Rows(pg.get(), "SELECT type, pool FROM events WHERE id = 1", 2),
            std::vector<std::string>{"machine_revoked|workers"});
  EXPECT_EQ(Rows(pg.get(), "SELECT type FROM events WHERE type LIKE 'kube%' ORDER BY id", 1),
            (std::vector<std::string>{"kubernetes_csr_approved", "kubernetes_csr_denied", "kubernetes_csr_waiting"}));
}

// Notifications received on `listener`, as "channel:payload": once `want`
// have come, those that come within 200 ms more (one too many shows), or
// all that came within 10 s when fewer do (a loaded machine delivers
// late, never early). With want 0: those of the next 300 ms.
std::vector<std::string> Heard(PGconn* listener, size_t want) {
  using std::chrono::milliseconds;
  std::vector<std::string> out;
  auto deadline = std::chrono::steady_clock::now() + (want == 0 ? milliseconds(300) : milliseconds(10000));
  bool enough = want == 0;
  for (;;) {
    EXPECT_EQ(PQconsumeInput(listener), 1) << PQerrorMessage(listener);
    while (PGnotify* n = PQnotifies(listener)) {
      out.push_back(std::string(n->relname) + ":" + n->extra);
      PQfreemem(n);
    }
    if (!enough && out.size() >= want) {
      enough = true;
      deadline = std::chrono::steady_clock::now() + milliseconds(200);
    }
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{PQsocket(listener), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
}

TEST_F(PostgresSchemaTest, ChangesAreNotified) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  PgConnPtr listener = Raw(url_);
  ASSERT_EQ(RawQuery(listener.get(), "LISTEN rackgate_changes"), "");

  // One transaction, many statements and rows: one notification per topic.
  {
    Transaction txn(c.get(), Transaction::Kind::kWrite);
    c->Run("INSERT INTO pools (name, created_at, updated_at) VALUES ('a', 1, 1), ('b', 1, 1)");
    c->Run("INSERT INTO pool_tokens (hash, pool, created_at) VALUES (decode('01', 'hex'), 'a', 1)");
    for (int i = 0; i < 3; ++i) {
      c->Prepare("INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, created_at, updated_at) "
                 "VALUES (?1, 'a', 'enrolled', decode('01', 'hex'), ?2, 1, 1)")
          .BindText(1, "node-" + std::to_string(i))
          .BindBlob(2, {static_cast<uint8_t>(i + 1)})
          .Run();
    }
    c->Run("UPDATE machines SET updated_at = 2");
    txn.Commit();
  }
  std::vector<std::string> heard = Heard(listener.get(), 2);
  std::multiset<std::string> got(heard.begin(), heard.end());
  EXPECT_EQ(got, (std::multiset<std::string>{"rackgate_changes:pools", "rackgate_changes:machines"}));

  // A token alone is a change of pools; a rollback tells nobody.
  c->Run("UPDATE pool_tokens SET expires_at = 5");
  EXPECT_EQ(Heard(listener.get(), 1),
            std::vector<std::string>{"rackgate_changes:pools"});
  {
    Transaction txn(c.get(), Transaction::Kind::kWrite);
    c->Run("DELETE FROM machines");
  }
  EXPECT_TRUE(Heard(listener.get(), 0).empty());
  // Tables no cache holds are quiet.
  c->Run("INSERT INTO webhooks (url, added_at) VALUES ('https://x', 1)");
  EXPECT_TRUE(Heard(listener.get(), 0).empty());
  // Issue 44: the CA rotation's record reaches every appliance's bundle.
  c->Run("INSERT INTO ca_rotations (kind, stage, current_pem, current_sha256, next_pem, next_sha256, prepared_at) "
         "VALUES ('appliance', 'prepared', 'c', 'c', 'n', 'n', 1)");
  EXPECT_EQ(Heard(listener.get(), 1), std::vector<std::string>{"rackgate_changes:ca"});
  c->Run("DELETE FROM ca_rotations");
  EXPECT_EQ(Heard(listener.get(), 1), std::vector<std::string>{"rackgate_changes:ca"});
}

TEST_F(PostgresSchemaTest, ResetIdentitiesAfterACopyWithIds) {
  auto c = OpenPg(url_);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(MigratePostgres(c.get()).ok());
  c->Run("INSERT INTO pools (name, created_at, updated_at) VALUES ('a', 1, 1)");
  c->Run("INSERT INTO machines (id, hostname, pool, state, ek_public, ek_hash, created_at, updated_at) "
         "VALUES (41, 'copied', 'a', 'enrolled', decode('01', 'hex'), decode('01', 'hex'), 1, 1)");
  ASSERT_TRUE(ResetPostgresIdentities(c.get()).ok());
  EXPECT_EQ(QueryInt(c.get(),
                     "INSERT INTO machines (hostname, pool, state, ek_public, ek_hash, created_at, updated_at) "
                     "VALUES ('new', 'a', 'enrolled', decode('01', 'hex'), decode('02', 'hex'), 1, 1) RETURNING id"),
            42);
  // An empty table starts at 1.
  EXPECT_EQ(QueryInt(c.get(), "INSERT INTO events (at, type) VALUES (1, 'csr_waiting') RETURNING id"), 1);
}

}  // namespace
}  // namespace rackgate::storage
