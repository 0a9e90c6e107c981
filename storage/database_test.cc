// Tests for Database's pool of read connections (storage/database.h): how
// many connections a burst of reads opens, which ones stay open, and when
// idle ones are closed. On PostgreSQL every connection is a forked server
// process that prepares every statement again, so a pool that closes its
// readers after each burst costs the server most of its CPU.
#include "storage/database.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "storage/audit.h"
#include "storage/testing/test_util.h"

namespace rackgate::storage {
namespace {

using testing::MustConnect;
using testing::MustOpen;
using testing::TempDir;

class DatabasePoolTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(store_, nullptr); }

  // A Database on the test's database whose opener counts the read
  // connections it opens.
  std::unique_ptr<Database> Make(const StoreOptions& options) {
    auto writer = MustConnect(path_, /*read_only=*/false);
    if (writer == nullptr) return nullptr;
    Database::Opener open = [this](bool read_only) -> Result<std::unique_ptr<Connection>> {
      if (read_only) ++readers_opened_;
      auto conn = MustConnect(path_, read_only);
      if (conn == nullptr) return Status::IoError("db_error", "the test's database cannot be opened");
      return conn;
    };
    return std::make_unique<Database>(options, std::move(open), std::move(writer));
  }

  // n reads at once: each holds its connection until all n hold one, so
  // the burst leases n readers.
  static void Burst(Database& db, int n) {
    std::latch all_in(n);
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([&] {
        const int64_t one = db.Read([&](Connection& c) {
          all_in.arrive_and_wait();
          Stmt s = c.Prepare("SELECT 1");
          EXPECT_TRUE(s.Step());
          return s.Int(0);
        });
        EXPECT_EQ(one, 1);
      });
    }
    for (auto& th : threads) th.join();
  }

  TempDir dir_;
  std::string path_ = dir_.File("pool.db");
  std::unique_ptr<Store> store_ = MustOpen(path_);  // creates the database
  std::atomic<int> readers_opened_{0};
};

TEST_F(DatabasePoolTest, ABurstsReadersStayOpenForTheNextBurst) {
  StoreOptions options;
  options.max_readers = 12;  // max_idle_readers unset: all of them
  auto db = Make(options);
  ASSERT_NE(db, nullptr);
  Burst(*db, 12);
  EXPECT_EQ(readers_opened_.load(), 12);
  Burst(*db, 12);
  Burst(*db, 12);
  EXPECT_EQ(readers_opened_.load(), 12) << "a burst as large as the last one opened connections again";
}

TEST_F(DatabasePoolTest, ReadersBeyondMaxIdleReadersAreClosed) {
  StoreOptions options;
  options.max_readers = 8;
  options.max_idle_readers = 2;
  auto db = Make(options);
  ASSERT_NE(db, nullptr);
  Burst(*db, 8);
  EXPECT_EQ(readers_opened_.load(), 8);
  Burst(*db, 8);
  EXPECT_EQ(readers_opened_.load(), 14) << "two idle readers kept, six opened again";
}

TEST_F(DatabasePoolTest, ReadersIdleForReaderIdleMsAreClosed) {
  StoreOptions options;
  options.max_readers = 8;
  // Long enough that the second burst comes within it on a loaded machine
  // too; the sleep is what outlasts it.
  options.reader_idle_ms = 500;
  auto db = Make(options);
  ASSERT_NE(db, nullptr);
  Burst(*db, 4);
  Burst(*db, 4);
  EXPECT_EQ(readers_opened_.load(), 4) << "readers used again within reader_idle_ms were closed";
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  Burst(*db, 4);
  EXPECT_EQ(readers_opened_.load(), 8) << "readers idle for longer than reader_idle_ms were used again";
}

// A group of one runs without a savepoint: a write that fails after it
// changed something leaves nothing behind, commits nothing, costs no
// SAVEPOINT/RELEASE, and the next write runs as usual.
TEST_F(DatabasePoolTest, ALoneWriteThatFailsLeavesNothing) {
  auto db = Make(StoreOptions{});
  ASSERT_NE(db, nullptr);
  db->Write([](Connection& c) { c.Exec("CREATE TABLE t (v INTEGER)"); });
  const RoundTrips before = db->GetRoundTrips();
  EXPECT_THROW(db->Write([](Connection& c) {
    c.Run("INSERT INTO t (v) VALUES (1)");
    Fail(Status::InvalidArgument("refused", "after a change"));
  }),
               StoreError);
  const RoundTrips after = db->GetRoundTrips();
  // BEGIN (and PostgreSQL's write lock), the INSERT, the rollback: no
  // savepoint, no COMMIT.
  const bool postgres = db->Read([](Connection& c) { return c.dialect() == Dialect::kPostgres; });
  EXPECT_EQ(after.statements - before.statements, postgres ? 4u : 3u);
  EXPECT_EQ(after.transactions - before.transactions, 1u);
  const auto count = [&] {
    return db->Read([](Connection& c) {
      Stmt s = c.Prepare("SELECT count(*) FROM t");
      EXPECT_TRUE(s.Step());
      return s.Int(0);
    });
  };
  EXPECT_EQ(count(), 0);
  db->Write([](Connection& c) { c.Run("INSERT INTO t (v) VALUES (2)"); });
  EXPECT_EQ(count(), 1);
}

// The audit chain's head is read once per write transaction and carried
// from row to row (storage/audit.cc): writes grouped into one transaction
// chain to each other, and a write rolled back after it wrote a row (to its
// savepoint, or with a whole group of rerunnable writes that then runs
// again) leaves no gap: the next write chains to the row before it.
class AuditGroupTest : public DatabasePoolTest, public ::testing::WithParamInterface<bool> {
 protected:
  // kThreads x kRounds writes of two audit rows each; every third refused
  // after its first row when `refuse`. Returns how many were refused.
  int Storm(Database& db, bool rerunnable, bool refuse) {
    std::atomic<int> refused{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRounds; ++i) {
          const bool fail = refuse && (t + i) % 3 == 0;
          const auto write = [&](Connection& c) {
            WriteAudit(c, Actor{"test", ""}, 1000 + i, {"first", nullptr, std::nullopt, std::nullopt, json{{"t", t}}});
            if (fail) Fail(Status::InvalidArgument("refused", "after its audit row"));
            WriteAudit(c, Actor{"test", ""}, 1000 + i, {"second", nullptr, std::nullopt, std::nullopt, json{{"t", t}}});
          };
          try {
            if (rerunnable) {
              db.WriteRerunnable(write);
            } else {
              db.Write(write);
            }
          } catch (const StoreError&) {
            ++refused;
          }
        }
      });
    }
    for (auto& th : threads) th.join();
    return refused.load();
  }

  static constexpr int kThreads = 8;
  static constexpr int kRounds = 20;
};

TEST_P(AuditGroupTest, RowsOfAGroupChainThroughARolledBackWrite) {
  const bool rerunnable = GetParam();
  auto db = Make(StoreOptions{});
  ASSERT_NE(db, nullptr);
  const int refused = Storm(*db, rerunnable, /*refuse=*/true);
  EXPECT_GT(refused, 0);
  auto chain = store_->VerifyAuditChain();
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_TRUE(chain->intact) << chain->problem;
  EXPECT_EQ(chain->rows, (kThreads * kRounds - refused) * 2);
  const auto [commits, writes] = db->CommitsAndWrites();
  std::printf("%s writes: %llu in %llu transactions\n", rerunnable ? "rerunnable" : "plain",
              static_cast<unsigned long long>(writes), static_cast<unsigned long long>(commits));
}

// Rerunnable writes that all succeed take no savepoint: per transaction
// BEGIN, COMMIT (and PostgreSQL's write lock) and one read of the chain's
// head; per write its two rows. Plain writes grouped take SAVEPOINT and
// RELEASE each as well.
TEST_P(AuditGroupTest, RerunnableWritesTakeNoSavepoint) {
  const bool rerunnable = GetParam();
  auto db = Make(StoreOptions{});
  ASSERT_NE(db, nullptr);
  const bool postgres = db->Read([](Connection& c) { return c.dialect() == Dialect::kPostgres; });
  const RoundTrips before = db->GetRoundTrips();
  ASSERT_EQ(Storm(*db, rerunnable, /*refuse=*/false), 0);
  const RoundTrips after = db->GetRoundTrips();
  const auto [commits, writes] = db->CommitsAndWrites();
  ASSERT_EQ(writes, uint64_t{kThreads} * kRounds);
  const uint64_t per_transaction = postgres ? 4 : 3;
  const uint64_t floor = commits * per_transaction + writes * 2;
  if (rerunnable) {
    EXPECT_EQ(after.statements - before.statements, floor);
  } else {
    EXPECT_GE(after.statements - before.statements, floor);
  }
  EXPECT_TRUE(store_->VerifyAuditChain()->intact);
}

INSTANTIATE_TEST_SUITE_P(PlainAndRerunnable, AuditGroupTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Rerunnable" : "Plain";
                         });

}  // namespace
}  // namespace rackgate::storage
