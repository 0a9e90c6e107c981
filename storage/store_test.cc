// Tests for the store as a whole: backend choice (OpenStore), state names,
// backups and locks held by another process.
#include <gtest/gtest.h>

#include <iterator>
#include <optional>
#include <sstream>
#include <string_view>
#include <utility>
#include <string>
#include <vector>

#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/store_test_fixture.h"

namespace rackgate::storage {
namespace {

using testing::B;
using testing::ExpectFailure;
using testing::MakeEnrollment;
using testing::MustOpen;
using testing::Op;
using testing::StoreTest;
using testing::TempDir;

// --- Operations --------------------------------------------------------------

TEST_F(StoreTest, BackupIsAConsistentCopy) {
  RACKGATE_SQLITE_ONLY("VACUUM INTO; postgres_test checks PostgreSQL's backup_unsupported");
  Attested("node-1", "a");
  const std::string copy = dir_.File("backup.db");
  ASSERT_TRUE(store_->Backup(copy).ok());
  ExpectFailure(store_->Backup(copy), Status::Code::kInvalidArgument, "field_invalid");
  auto restored = MustOpen(copy);
  ASSERT_NE(restored, nullptr);
  auto m = restored->GetMachine("node-1");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->state, MachineState::kAttested);
  EXPECT_EQ(restored->ListAudit()->size(), Audit().size());
}

TEST_F(StoreTest, ALockHeldByAnotherProcessIsDbBusy) {
  RACKGATE_SQLITE_ONLY("SQLite's file lock; postgres_test checks the fleet-wide write lock");
  Enroll("node-1", "a");
  store_.reset();
  StoreOptions o;
  o.busy_timeout_ms = 50;
  store_ = MustOpen(path_, o);
  ASSERT_NE(store_, nullptr);
  auto other = SqliteConnection::Open(path_, 0, false);
  ASSERT_TRUE(other.ok());
  (*other)->Exec("BEGIN IMMEDIATE");
  auto r = store_->Enroll(MakeEnrollment("node-2", "b"), Op(), false, 1);
  ExpectFailure(r.status(), Status::Code::kIoError, "db_busy");
  EXPECT_NE(r.status().message().find("locked"), std::string::npos) << r.status().message();
  ExpectFailure(store_->ConsumeSession("x", 1).status(), Status::Code::kIoError, "db_busy");
  // Readers are not blocked by a writer in WAL mode.
  EXPECT_TRUE(store_->GetMachine("node-1").ok());
  (*other)->Exec("ROLLBACK");
  EXPECT_TRUE(store_->Enroll(MakeEnrollment("node-2", "b"), Op(), false, 1).ok());
}

TEST(StoreHelpers, StatesAndAddressKinds) {
  for (const char* s : {"pending", "enrolled", "attested", "provisioned", "joined", "revoked"}) {
    EXPECT_TRUE(IsValidState(s)) << s;
  }
  EXPECT_FALSE(IsValidState("Enrolled"));
  EXPECT_FALSE(IsValidState(""));
  for (const char* k : {"InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS", "Hostname"}) {
    EXPECT_TRUE(IsValidAddressKind(k)) << k;
  }
  EXPECT_FALSE(IsValidAddressKind("internalip"));
}

// --- Choosing a backend ------------------------------------------------------

TEST(OpenStore, APlainPathIsSqlite) {
  TempDir dir;
  auto store = OpenStore(dir.File("plain.db"));
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->PutPool(Pool{"workers"}, Op(), 10).ok());
  // The same file, through the SQLite factory: the pool is there.
  auto again = Store::Open(dir.File("plain.db"));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)->GetPool("workers").ok());
}

TEST(OpenStore, TheSqlitePrefixNamesTheFile) {
  TempDir dir;
  const std::string path = dir.File("prefixed.db");
  auto store = OpenStore("sqlite:" + path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  ASSERT_TRUE((*store)->PutPool(Pool{"masters"}, Op(), 10).ok());
  auto again = Store::Open(path);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE((*again)->GetPool("masters").ok());
  // "sqlite:" with no path is refused as an empty path is.
  ExpectFailure(OpenStore("sqlite:").status(), Status::Code::kInvalidArgument, "field_invalid");
  ExpectFailure(OpenStore("").status(), Status::Code::kInvalidArgument, "field_invalid");
}

TEST(OpenStore, PostgresqlUrlsOpenThePostgresqlStore) {
  // Nothing listens on port 1: both schemes reach PostgreSQL's connect,
  // which fails as an unreachable server does.
  for (const char* uri : {"postgresql://rackgate:s3cret@127.0.0.1:1/rackgate", "postgres://127.0.0.1:1/rackgate"}) {
    auto store = OpenStore(uri);
    ExpectFailure(store.status(), Status::Code::kIoError, "db_unavailable");
    // The URI may carry a password: it is never repeated.
    EXPECT_EQ(store.status().message().find("s3cret"), std::string::npos) << store.status().message();
  }
}

// --- State names -------------------------------------------------------------

TEST(MachineStates, NamesRoundTrip) {
  const std::vector<std::pair<MachineState, std::string>> expected = {
      {MachineState::kPending, "pending"},   {MachineState::kEnrolled, "enrolled"},
      {MachineState::kAttested, "attested"}, {MachineState::kProvisioned, "provisioned"},
      {MachineState::kJoined, "joined"},     {MachineState::kRevoked, "revoked"}};
  ASSERT_EQ(std::size(kAllMachineStates), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& [state, name] = expected[i];
    EXPECT_EQ(kAllMachineStates[i], state) << name;
    EXPECT_EQ(StateName(state), name);
    EXPECT_EQ(ParseMachineState(name), state) << name;
    EXPECT_EQ(ParseMachineState(StateName(state)), state) << name;
    std::ostringstream out;
    out << state;
    EXPECT_EQ(out.str(), name);
  }
}

TEST(MachineStates, OnlyExactNamesParse) {
  for (const char* bad : {"", "Enrolled", "JOINED", " joined", "joined ", "sleeping", "revoked\n"}) {
    EXPECT_EQ(ParseMachineState(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseMachineState(std::string_view("joined\0", 7)), std::nullopt);
  EXPECT_EQ(StateName(static_cast<MachineState>(42)), "");
  std::ostringstream out;
  out << static_cast<MachineState>(42);
  EXPECT_EQ(out.str(), "MachineState(42)");
}

}  // namespace
}  // namespace rackgate::storage
