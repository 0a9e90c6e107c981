// The store a test runs against: SQLite by default, PostgreSQL when the
// environment asks for it, so one test binary checks both backends.
//
//   RACKGATE_TEST_STORE=postgresql   run on PostgreSQL, at
//   RACKGATE_TEST_POSTGRES=URL       (script/pg-lab run -- sets this)
//
// meson registers a test binary twice: plainly (SQLite), and under
// `script/pg-lab run --` with RACKGATE_TEST_STORE=postgresql
// (docs/testing-postgresql.md).
#ifndef RACKGATE_STORAGE_TESTING_TEST_STORE_H_
#define RACKGATE_STORAGE_TESTING_TEST_STORE_H_

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "storage/store.h"

namespace rackgate::storage::testing {

// True when RACKGATE_TEST_STORE says postgresql.
bool TestingPostgres();

// Why this test cannot run on the backend asked for, or nullopt when it can:
// PostgreSQL was asked for and RACKGATE_TEST_POSTGRES is unset (the server
// is not installed). Tests GTEST_SKIP() with this message.
std::optional<std::string> BackendUnavailable();

// Opens the test's store. On SQLite: Store::Open(sqlite_path). On
// PostgreSQL: a database of its own, named after sqlite_path (the same path
// opens the same database again, empty the first time), on the server of
// RACKGATE_TEST_POSTGRES: a copy of the migrated template, or the database
// of an ended test of this process emptied (test_store.cc, "Databases used
// again").
Result<std::unique_ptr<Store>> OpenTestStore(const std::string& sqlite_path, const StoreOptions& options = {});

// On PostgreSQL: the URL of the database OpenTestStore(sqlite_path) opens
// (created when absent), for a test that looks at the tables directly;
// the failure when it cannot be created.
Result<std::string> TestDatabaseUrl(const std::string& sqlite_path);

}  // namespace rackgate::storage::testing

#endif  // RACKGATE_STORAGE_TESTING_TEST_STORE_H_
