// The store a test runs against (test_store.h).
#include "storage/testing/test_store.h"

#include <stdlib.h>

#include <string_view>

namespace rackgate::storage::testing {

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
  // TODO(pgdriver): a database per sqlite_path on RACKGATE_TEST_POSTGRES.
  return Status::Unsupported("db_backend_unsupported", "the PostgreSQL backend is not built yet");
}

}  // namespace rackgate::storage::testing
