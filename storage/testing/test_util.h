// Test helpers for storage/: scratch directories and ready-made rows.
#ifndef RACKGATE_STORAGE_TESTING_TEST_UTIL_H_
#define RACKGATE_STORAGE_TESTING_TEST_UTIL_H_

#ifndef RACKGATE_STORAGE_INTERNAL
#error "storage/testing/test_util.h is internal to storage/ tests"
#endif

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "storage/postgres.h"
#include "storage/sqlite.h"
#include "storage/store.h"
#include "storage/testing/test_store.h"

namespace rackgate::storage::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
 public:
  TempDir() {
    const char* base = getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/rackgate-storage-XXXXXX";
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline Bytes B(std::string_view s) { return Bytes(s.begin(), s.end()); }

// An enrollment whose EK bytes are derived from `tag`, so that equal tags mean
// equal EKs.
inline Enrollment MakeEnrollment(const std::string& hostname, const std::string& ek_tag,
                                 const std::string& pool = "workers") {
  Enrollment e;
  e.hostname = hostname;
  e.pool = pool;
  e.ek_public = B("ekpub:" + ek_tag);
  e.ek_hash = B("ekhash:" + ek_tag);
  e.addresses = {{"InternalIP", "10.0.0.1"}, {"Hostname", hostname}};
  return e;
}

inline Actor Op(const std::string& why = "test") { return Actor{"uid:0(root)", why}; }

// The test's store on the backend the environment asks for
// (storage/testing/test_store.h): on PostgreSQL, `path` names a database of
// its own, and the same path opens the same database again.
inline std::unique_ptr<Store> MustOpen(const std::string& path, const StoreOptions& options = {}) {
  auto s = OpenTestStore(path, options);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().ToString();
    return nullptr;
  }
  return std::move(s).value();
}

// A connection of its own to the test's database (`path`, as MustOpen),
// for a test that looks at the tables directly.
inline std::unique_ptr<Connection> MustConnect(const std::string& path, bool read_only = true) {
  if (TestingPostgres()) {
    auto url = TestDatabaseUrl(path);
    if (!url.ok()) {
      ADD_FAILURE() << url.status().ToString();
      return nullptr;
    }
    auto c = PgConnection::Open(*url, StoreOptions{}, read_only);
    if (c.ok()) return std::move(c).value();
    ADD_FAILURE() << c.status().ToString();
    return nullptr;
  }
  auto c = SqliteConnection::Open(path, 1000, read_only);
  if (c.ok()) return std::move(c).value();
  ADD_FAILURE() << c.status().ToString();
  return nullptr;
}

// Skips every test of the binary when the backend asked for is not there
// (PostgreSQL not installed): registered once per binary, before main.
class BackendEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (auto why = BackendUnavailable()) GTEST_SKIP() << *why;
  }
};
inline ::testing::Environment* const kBackendEnvironment =
    ::testing::AddGlobalTestEnvironment(new BackendEnvironment);

}  // namespace rackgate::storage::testing

// For a test about the SQLite file itself (its PRAGMAs, its mode, VACUUM
// INTO, edits through sqlite3): skipped on PostgreSQL, saying why.
#define RACKGATE_SQLITE_ONLY(why)                                               \
  do {                                                                          \
    if (::rackgate::storage::testing::TestingPostgres()) {                      \
      GTEST_SKIP() << "SQLite only (" << (why) << "): this run is on PostgreSQL"; \
    }                                                                           \
  } while (0)

#endif  // RACKGATE_STORAGE_TESTING_TEST_UTIL_H_
