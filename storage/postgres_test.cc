// Tests for the PostgreSQL backend: PgConnection itself (placeholders,
// types, errors, a lost server), and several stores ("appliances") on one
// database. The store tests run on SQLite too (two stores on one file).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/postgres.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;

// The lab server's URL, or "" (then the test skips).
std::string ServerUrl() {
  const char* url = getenv("RACKGATE_TEST_POSTGRES");
  return url != nullptr ? url : "";
}

#define NEED_SERVER()                                                                              \
  if (ServerUrl().empty()) GTEST_SKIP() << "needs a PostgreSQL server: run under `script/pg-lab run --`"

std::unique_ptr<PgConnection> MustConnect(bool read_only = false) {
  auto c = PgConnection::Open(ServerUrl(), StoreOptions{}, read_only);
  if (!c.ok()) {
    ADD_FAILURE() << c.status().ToString();
    return nullptr;
  }
  return std::move(c).value();
}

TEST(PgPlaceholders, NumberedParametersBecomeDollars) {
  int n = -1;
  EXPECT_EQ(PgPlaceholders("SELECT ?1, ?2 FROM t WHERE a = ?12", &n), "SELECT $1, $2 FROM t WHERE a = $12");
  EXPECT_EQ(n, 12);
  EXPECT_EQ(PgPlaceholders("SELECT 1", &n), "SELECT 1");
  EXPECT_EQ(n, 0);
  // Strings, identifiers and comments are left alone, doubled quotes too.
  EXPECT_EQ(PgPlaceholders("SELECT '?1', 'it''s ?2', \"c?3\" -- ?4\n, ?5", &n),
            "SELECT '?1', 'it''s ?2', \"c?3\" -- ?4\n, $5");
  EXPECT_EQ(n, 5);
  // A '?' not followed by a digit (jsonb's operator) stays.
  EXPECT_EQ(PgPlaceholders("SELECT j ? 'k', ?1", &n), "SELECT j ? 'k', $1");
  EXPECT_EQ(n, 1);
  // An unterminated string runs to the end.
  EXPECT_EQ(PgPlaceholders("SELECT '?1", &n), "SELECT '?1");
  EXPECT_EQ(n, 0);
}

TEST(PgConnection, AFailedConnectNeverRepeatsTheUrlOrItsPassword) {
  // Port 1 on loopback: refused at once, no server needed.
  for (const std::string url : {"postgresql://rackgate:s3cretPW@127.0.0.1:1/rackgate",
                                "postgres://rackgate:s3cretPW@127.0.0.1:1/rackgate?sslmode=disable",
                                "host=127.0.0.1 port=1 user=rackgate password=s3cretPW"}) {
    auto c = PgConnection::Open(url, StoreOptions{}, false);
    ExpectFailure(c.status(), Status::Code::kIoError, "db_unavailable");
    EXPECT_EQ(c.status().message().find("s3cretPW"), std::string::npos) << c.status().message();
    EXPECT_EQ(c.status().message().find(url), std::string::npos) << c.status().message();
  }
  // Through OpenStore, as rackgated opens it.
  auto s = OpenStore("postgresql://rackgate:s3cretPW@127.0.0.1:1/rackgate");
  ExpectFailure(s.status(), Status::Code::kIoError, "db_unavailable");
  EXPECT_EQ(s.status().message().find("s3cretPW"), std::string::npos) << s.status().message();
  // A URL libpq cannot parse: its text is not quoted back at all.
  auto bad = PgConnection::Open("postgresql://rackgate:s3cretPW@127.0.0.1:1/rackgate?nosuch=%zz", StoreOptions{},
                                false);
  ExpectFailure(bad.status(), Status::Code::kInvalidArgument, "field_invalid");
  EXPECT_EQ(bad.status().message().find("s3cretPW"), std::string::npos) << bad.status().message();
}

TEST(PgConnection, TypesRoundTrip) {
  NEED_SERVER();
  auto c = MustConnect();
  ASSERT_NE(c, nullptr);
  c->Exec("CREATE TEMP TABLE rt (i BIGINT, t TEXT, b BYTEA, flag BOOLEAN)");
  Bytes all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<uint8_t>(i));
  const int64_t ints[] = {std::numeric_limits<int64_t>::min(), -1, 0, 1, std::numeric_limits<int64_t>::max()};
  for (int64_t v : ints) {
    c->Prepare("INSERT INTO rt (i, t, b, flag) VALUES (?1, ?2, ?3, ?4 <> 0)")
        .BindInt(1, v)
        .BindText(2, "héllo '?1' " + std::to_string(v))
        .BindBlob(3, all)
        .BindInt(4, 1)
        .Run();
    EXPECT_EQ(c->Changes(), 1);
  }
  {
    Stmt s = c->Prepare("SELECT i, t, b, flag FROM rt ORDER BY i");
    for (int64_t v : ints) {
      ASSERT_TRUE(s.Step());
      EXPECT_EQ(s.Int(0), v);
      EXPECT_EQ(s.Text(1), "héllo '?1' " + std::to_string(v));
      EXPECT_EQ(s.Blob(2), all);
      EXPECT_EQ(s.Int(3), 1);  // a boolean reads as 0/1
    }
    EXPECT_FALSE(s.Step());
  }
  // Empty values are not NULL; NULLs are.
  c->Prepare("INSERT INTO rt (i, t, b) VALUES (?1, ?2, ?3)").BindInt(1, 7).BindText(2, "").BindBlob(3, {}).Run();
  c->Prepare("INSERT INTO rt (i, t, b) VALUES (?1, ?2, ?3)").BindInt(1, 8).BindNull(2).BindNull(3).Run();
  {
    Stmt s = c->Prepare("SELECT t, b FROM rt WHERE i = ?1");
    s.BindInt(1, 7);
    ASSERT_TRUE(s.Step());
    EXPECT_FALSE(s.IsNull(0));
    EXPECT_FALSE(s.IsNull(1));
    EXPECT_EQ(s.Text(0), "");
    EXPECT_EQ(s.Blob(1), Bytes());
  }
  {
    Stmt s = c->Prepare("SELECT t, b FROM rt WHERE i = ?1");
    s.BindInt(1, 8);
    ASSERT_TRUE(s.Step());
    EXPECT_TRUE(s.IsNull(0));
    EXPECT_TRUE(s.IsNull(1));
    EXPECT_EQ(s.OptBlob(1), std::nullopt);
  }
  // The same text with other parameter types is another prepared statement:
  // a NULL where an int was bound before still works.
  {
    Stmt s = c->Prepare("SELECT count(*) FROM rt WHERE i = ?1 OR ?1 IS NULL");
    s.BindInt(1, 7);
    ASSERT_TRUE(s.Step());
    EXPECT_EQ(s.Int(0), 1);
  }
  // A NULL whose type only a later use tells (`?1 IS NULL` comes first),
  // inside a transaction, which the server's refusal of the first guess
  // must not end.
  c->Begin(Connection::TxKind::kWrite);
  for (int round = 0; round < 2; ++round) {
    Stmt s = c->Prepare("SELECT count(*) FROM rt WHERE (?1 IS NULL OR i = ?1) AND (?2 IS NULL OR t = ?2)");
    s.BindNull(1).BindNull(2);
    ASSERT_TRUE(s.Step());
    EXPECT_EQ(s.Int(0), 7);
  }
  c->Run("COMMIT");
  // Changes() counts the last INSERT/UPDATE/DELETE, RETURNING rows too.
  {
    Stmt s = c->Prepare("UPDATE rt SET t = 'x' WHERE i >= ?1 RETURNING i");
    s.BindInt(1, 1);
    int rows = 0;
    while (s.Step()) ++rows;
    EXPECT_EQ(rows, 4);  // 1, max, 7, 8
    EXPECT_EQ(c->Changes(), 4);
  }
  // A NUL byte cannot be stored in text: refused, not truncated.
  try {
    c->Prepare("SELECT ?1").BindText(1, std::string("a\0b", 3));
    ADD_FAILURE() << "a NUL byte was accepted";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.status().reason(), "field_invalid");
  }
}

TEST(PgConnection, ErrorsAreClassified) {
  NEED_SERVER();
  auto a = MustConnect();
  auto b = MustConnect();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // A syntax error is db_error, and names the statement.
  try {
    a->Run("SELEC 1");
    ADD_FAILURE() << "no error";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.status().reason(), "db_error");
    EXPECT_NE(e.status().message().find("SELEC 1"), std::string::npos) << e.status().message();
  }
  // The fleet-wide write lock held by another connection: lock_timeout
  // (busy_timeout_ms) and db_busy, and Begin leaves no transaction open.
  auto quick = PgConnection::Open(ServerUrl(), StoreOptions{.busy_timeout_ms = 100}, false);
  ASSERT_TRUE(quick.ok()) << quick.status().ToString();
  a->Begin(Connection::TxKind::kWrite);
  try {
    (*quick)->Begin(Connection::TxKind::kWrite);
    ADD_FAILURE() << "the write lock was granted twice";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.status().reason(), "db_busy") << e.status().ToString();
  }
  EXPECT_FALSE((*quick)->InTransaction());
  a->Run("COMMIT");
  (*quick)->Begin(Connection::TxKind::kWrite);
  (*quick)->Run("COMMIT");
  // A reader's transactions are read-only.
  auto r = MustConnect(/*read_only=*/true);
  ASSERT_NE(r, nullptr);
  r->Begin(Connection::TxKind::kRead);
  try {
    r->Run("CREATE TABLE nope (x INT)");
    ADD_FAILURE() << "a reader wrote";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.status().reason(), "db_unavailable") << e.status().ToString();  // 25006
  }
  EXPECT_TRUE(r->InTransaction());
  r->RollbackQuietly();
  EXPECT_FALSE(r->InTransaction());
}

// The server ends the connection (as a restart or a failover does): the
// statement fails with db_unavailable, the connection says Broken, and a
// new one works.
TEST(PgConnection, ALostConnectionIsDbUnavailable) {
  NEED_SERVER();
  auto victim = MustConnect();
  auto admin = MustConnect();
  ASSERT_NE(victim, nullptr);
  ASSERT_NE(admin, nullptr);
  Stmt pid = victim->Prepare("SELECT pg_backend_pid()");
  ASSERT_TRUE(pid.Step());
  const int64_t victim_pid = pid.Int(0);
  pid.Run();
  admin->Prepare("SELECT pg_terminate_backend(?1::int)").BindInt(1, victim_pid).Run();
  try {
    victim->Run("SELECT 1");
    ADD_FAILURE() << "a terminated connection answered";
  } catch (const StoreError& e) {
    EXPECT_EQ(e.status().reason(), "db_unavailable") << e.status().ToString();
  }
  EXPECT_TRUE(victim->Broken());
  EXPECT_FALSE(victim->InTransaction());
  EXPECT_NE(MustConnect(), nullptr);
}

// The store recovers by itself: a read is retried once on a fresh
// connection; the first write after the loss fails (it may not be
// retried), the next one reconnects.
TEST_F(StoreTest, TheStoreRecoversFromLostConnections) {
  if (!testing::TestingPostgres()) GTEST_SKIP() << "PostgreSQL only: SQLite has no server to lose";
  Enroll("node-1", "a");
  ASSERT_TRUE(store_->GetMachine("node-1").ok());
  auto admin = MustConnect();
  ASSERT_NE(admin, nullptr);
  auto kill_all = [&] {
    // Every connection of the test databases' stores (not the admin's).
    admin
        ->Prepare("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'rackgated' "
                  "AND pid <> pg_backend_pid() AND datname LIKE 't\\_%'")
        .Run();
  };
  kill_all();
  auto m = store_->GetMachine("node-1");
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  kill_all();
  auto first = store_->Enroll(testing::MakeEnrollment("node-2", "b"), Op(), false, 1);
  ExpectFailure(first.status(), Status::Code::kIoError, "db_unavailable");
  auto second = store_->Enroll(testing::MakeEnrollment("node-2", "b"), Op(), false, 1);
  EXPECT_TRUE(second.ok()) << second.status().ToString();
}

TEST_F(StoreTest, PostgresBackupsAreRefusedNamingTheTools) {
  if (!testing::TestingPostgres()) GTEST_SKIP() << "PostgreSQL only: SQLite backs up with VACUUM INTO";
  Status s = store_->Backup(dir_.File("copy.db"));
  ExpectFailure(s, Status::Code::kUnsupported, "backup_unsupported");
  EXPECT_NE(s.message().find("pg_basebackup"), std::string::npos) << s.message();
}

// --- Two appliances on one database -------------------------------------------

// A session raced from both stores: exactly one ConsumeSession wins, every
// round.
TEST_F(StoreTest, ASessionIsConsumedOnceAcrossTwoStores) {
  auto other = MustOpen(path_);
  ASSERT_NE(other, nullptr);
  Machine m = Enroll("node-1", "a");
  Store* stores[2] = {store_.get(), other.get()};
  constexpr int kRounds = 30;
  constexpr int kThreads = 4;
  for (int round = 0; round < kRounds; ++round) {
    const std::string id = "s" + std::to_string(round);
    ASSERT_TRUE(store_->CreateSession(MakeSession(m, id)).ok());
    std::atomic<int> wins{0};
    std::atomic<int> used{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        auto r = stores[t % 2]->ConsumeSession(id, 1001);
        if (r.ok()) {
          ++wins;
        } else if (r.status().reason() == "session_used") {
          ++used;
        } else {
          ADD_FAILURE() << r.status().ToString();
        }
      });
    }
    go = true;
    for (auto& th : threads) th.join();
    EXPECT_EQ(wins.load(), 1) << "round " << round;
    EXPECT_EQ(used.load(), kThreads - 1) << "round " << round;
  }
}

// A revoke through one store is seen through the other at once: no cache,
// no stale standby.
TEST_F(StoreTest, ARevokeIsSeenByTheOtherStoreAtOnce) {
  auto other = MustOpen(path_);
  ASSERT_NE(other, nullptr);
  Machine m = Attested("node-1", "a");
  ASSERT_TRUE(other->LookupToken(B("tokhash-a"), 1001).ok());
  ASSERT_TRUE(store_->Revoke("node-1", Op(), 1002).ok());
  ExpectFailure(other->LookupToken(B("tokhash-a"), 1003).status(), Status::Code::kVerificationFailed,
                "token_revoked");
}

// The change listener of one store hears a PutPool made through the other
// (and "*" when it connects); its own writes are not announced to it.
TEST_F(StoreTest, TheChangeListenerHearsTheOtherStore) {
  if (!testing::TestingPostgres()) GTEST_SKIP() << "PostgreSQL only: one SQLite file has one process";
  auto other = MustOpen(path_);
  ASSERT_NE(other, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> heard;
  store_->SetChangeListener([&](std::string_view topic) {
    std::lock_guard<std::mutex> lock(mu);
    heard.emplace_back(topic);
    cv.notify_all();
  });
  auto wait_for = [&](const std::string& topic) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10),
                       [&] { return std::find(heard.begin(), heard.end(), topic) != heard.end(); });
  };
  ASSERT_TRUE(wait_for("*"));
  // Its own write first: by the time the other's arrives, its own would have.
  ASSERT_TRUE(store_->PutPool(Pool{"own"}, Op(), 20).ok());
  ASSERT_TRUE(other->PutPool(Pool{"gpu"}, Op(), 20).ok());
  ASSERT_TRUE(wait_for("pools"));
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(std::count(heard.begin(), heard.end(), "pools"), 1);
  }
  ASSERT_TRUE(other->Enroll(testing::MakeEnrollment("node-9", "z"), Op(), false, 30).ok());
  EXPECT_TRUE(wait_for("machines"));
  store_->SetChangeListener(nullptr);
}

}  // namespace
}  // namespace rackgate::storage
