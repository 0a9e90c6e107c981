// What every backend shares: state names, address kinds, and the factories
// that pick a backend (Store::Open, OpenStore).
#include "storage/store.h"

#include <ostream>

#include "storage/schema.h"
#include "storage/sql_store.h"

namespace rackgate::storage {

namespace {

constexpr std::string_view kSqlitePrefix = "sqlite:";
// libpq accepts both URI schemes.
constexpr std::string_view kPostgresPrefixes[] = {"postgresql://", "postgres://"};

}  // namespace

std::string_view StateName(MachineState state) {
  switch (state) {
    case MachineState::kPending:
      return "pending";
    case MachineState::kEnrolled:
      return "enrolled";
    case MachineState::kAttested:
      return "attested";
    case MachineState::kProvisioned:
      return "provisioned";
    case MachineState::kJoined:
      return "joined";
    case MachineState::kRevoked:
      return "revoked";
  }
  return "";
}

std::optional<MachineState> ParseMachineState(std::string_view name) {
  for (MachineState s : kAllMachineStates) {
    if (StateName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsValidState(std::string_view state) { return ParseMachineState(state).has_value(); }

std::ostream& operator<<(std::ostream& out, MachineState state) {
  const std::string_view name = StateName(state);
  if (name.empty()) return out << "MachineState(" << static_cast<int>(state) << ")";
  return out << name;
}

bool IsValidAddressKind(std::string_view kind) {
  return kind == kAddressInternalIP || kind == kAddressExternalIP || kind == kAddressInternalDNS ||
         kind == kAddressExternalDNS || kind == kAddressHostname;
}

int Store::CurrentSchemaVersion() { return LatestSchemaVersion(); }

Store::WriteStats SqlStore::GetWriteStats() const {
  auto [commits, writes] = db_->CommitsAndWrites();
  return {commits, writes};
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  return SqliteStore::Open(path, options);
}

namespace {

bool IsPostgresUrl(std::string_view database) {
  for (std::string_view prefix : kPostgresPrefixes) {
    if (database.starts_with(prefix)) return true;
  }
  return false;
}

}  // namespace

std::string RedactDatabase(const std::string& database) {
  if (!IsPostgresUrl(database)) {
    return database.starts_with(kSqlitePrefix) ? database.substr(kSqlitePrefix.size()) : database;
  }
  const size_t start = database.find("://") + 3;
  std::string_view rest = std::string_view(database).substr(start);
  rest = rest.substr(0, rest.find_first_of("?#"));  // query parameters may hold password=
  std::string_view authority = rest.substr(0, rest.find('/'));
  std::string_view path = rest.substr(authority.size());
  std::string user;
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    user = std::string(authority.substr(0, std::min(at, authority.find(':'))));
    authority.remove_prefix(at + 1);
  }
  return database.substr(0, start) + (user.empty() ? "" : user + "@") + std::string(authority) +
         std::string(path);
}

Result<std::unique_ptr<Store>> OpenStore(const std::string& database, const StoreOptions& options) {
  for (std::string_view prefix : kPostgresPrefixes) {
    // SECURITY: nothing PostgresStore says repeats the URI, which may carry
    // a password.
    if (database.starts_with(prefix)) return PostgresStore::Open(database, options);
  }
  if (database.starts_with(kSqlitePrefix)) return Store::Open(database.substr(kSqlitePrefix.size()), options);
  return Store::Open(database, options);
}

}  // namespace rackgate::storage
