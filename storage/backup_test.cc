// The online copy of a live SQLite store (storage/backup.h): consistent while
// another writer keeps committing, private, and refused for what it cannot
// copy; and the restore's own audit row.
#include "storage/backup.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include "storage/store.h"
#include "storage/testing/test_util.h"

namespace rackgate::storage {
namespace {

using testing::MustOpen;
using testing::TempDir;

TEST(SqliteBackupTest, CopiesOneMomentWhileAnotherWriterCommits) {
  TempDir dir;
  const std::string live = dir.File("rackgate.db");
  auto store = MustOpen(live);
  ASSERT_NE(store, nullptr);
  // A writer that never stops during the copy: one audit row per commit.
  // It writes until `until`, which is set after the copy: so some rows
  // are always committed after it, whatever the machine's speed.
  std::atomic<int> until{1 << 30};
  std::atomic<int> written{0};
  std::thread writer([&] {
    for (int i = 0; written.load() < until.load(); ++i) {
      if (store->AuditAdminRefusal("", "{\"n\":" + std::to_string(i) + "}", Actor{"test", "load"}, 1000 + i).ok()) {
        ++written;
      }
    }
  });
  while (written.load() < 20) std::this_thread::yield();
  int64_t steps = 0;
  const std::string copy = dir.File("copy.db");
  auto report = BackupSqliteFile(live, copy, [&](int64_t, int64_t) { ++steps; });
  until = written.load() + 5;
  writer.join();
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_GT(steps, 0);
  EXPECT_EQ(report->schema_version, Store::CurrentSchemaVersion());
  struct stat st {};
  ASSERT_EQ(::stat(copy.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(report->bytes, st.st_size);
  // One self-contained file: no -wal beside it.
  EXPECT_NE(::access((copy + "-wal").c_str(), F_OK), 0);
  auto chain = VerifyAuditChainFile(copy);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  EXPECT_TRUE(chain->intact) << chain->message;
  auto now = store->VerifyAuditChain();
  ASSERT_TRUE(now.ok());
  EXPECT_GE(chain->head_id, 20);
  EXPECT_LT(chain->head_id, now->head_id) << "the copy is of a moment before the writer stopped";
  // The copy's head is a row of the live chain, unchanged.
  auto anchored = store->VerifyAuditChain(AuditAnchor{chain->head_id, chain->head_hash});
  ASSERT_TRUE(anchored.ok());
  EXPECT_TRUE(anchored->intact) << anchored->message;
}

TEST(SqliteBackupTest, RefusesWhatItCannotCopy) {
  TempDir dir;
  const std::string live = dir.File("rackgate.db");
  ASSERT_NE(MustOpen(live), nullptr);
  EXPECT_EQ(BackupSqliteFile(dir.File("absent.db"), dir.File("a.db")).status().reason(), "db_missing");
  ASSERT_TRUE(BackupSqliteFile(live, dir.File("b.db")).ok());
  EXPECT_EQ(BackupSqliteFile(live, dir.File("b.db")).status().reason(), "field_invalid");
  // An SQLite file of something else.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(dir.File("other.db").c_str(), &other), SQLITE_OK);
  sqlite3_exec(other, "CREATE TABLE t (x)", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(BackupSqliteFile(dir.File("other.db"), dir.File("c.db")).status().reason(), "db_not_rackgate");
  EXPECT_NE(::access(dir.File("c.db").c_str(), F_OK), 0) << "a refused copy leaves no file";
  EXPECT_EQ(SqliteFileSchemaVersion(dir.File("other.db")).status().reason(), "db_not_rackgate");
}

TEST(SqliteBackupTest, TheRestoreIsOneAuditRowAfterTheRestoredHead) {
  TempDir dir;
  const std::string path = dir.File("rackgate.db");
  {
    auto store = MustOpen(path);
    ASSERT_TRUE(store->AuditAdminRefusal("", "{}", Actor{"test", "a row"}, 1000).ok());
  }
  auto before = VerifyAuditChainFile(path);
  ASSERT_TRUE(before.ok());
  RestoreRecord record{"/backup/a.tar", "2026-11-29T18:00:00Z", "0.2.0", before->head_id, before->head_hash};
  auto head = RecordSqliteRestore(path, record, "uid:0(root)", 2000);
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->head_id, before->head_id + 1);
  auto after = VerifyAuditChainFile(path, AuditAnchor{before->head_id, before->head_hash});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->intact) << after->message;
  EXPECT_EQ(after->head_hash, head->head_hash);
  auto rows = MustOpen(path)->ListAudit();
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->back().action, "backup_restored");
  EXPECT_NE(rows->back().detail_json.find("/backup/a.tar"), std::string::npos);
}

}  // namespace
}  // namespace rackgate::storage
