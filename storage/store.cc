// What every backend shares: state names, address kinds, and the factories
// that pick a backend (Store::Open, OpenStore).
#include "storage/store.h"

#include <algorithm>
#include <cctype>
#include <ostream>
#include <tuple>

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

std::vector<Address> NormalizeAddresses(std::vector<Address> a) {
  std::sort(a.begin(), a.end(),
            [](const Address& x, const Address& y) { return std::tie(x.kind, x.value) < std::tie(y.kind, y.value); });
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

int Store::CurrentSchemaVersion() { return LatestSchemaVersion(); }

Store::WriteStats SqlStore::GetWriteStats() const {
  auto [commits, writes] = db_->CommitsAndWrites();
  const RoundTrips r = db_->GetRoundTrips();
  return {commits, writes, r.statements, r.transactions};
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, const StoreOptions& options) {
  return SqliteStore::Open(path, options);
}

bool IsPostgresUrl(std::string_view database) {
  for (std::string_view prefix : kPostgresPrefixes) {
    if (database.starts_with(prefix)) return true;
  }
  return false;
}

bool IsServerDatabase(std::string_view database) { return IsPostgresUrl(database); }

std::optional<std::string> DatabaseFile(std::string_view database) {
  if (IsServerDatabase(database)) return std::nullopt;
  if (database.starts_with(kSqlitePrefix)) database.remove_prefix(kSqlitePrefix.size());
  return std::string(database);
}

namespace {

// A query key as libpq reads it, percent-decoded and lower-cased, so
// "Pass%77ord" is seen as password.
std::string DecodedKey(std::string_view key) {
  std::string out;
  for (size_t i = 0; i < key.size(); ++i) {
    char c = key[i];
    if (c == '%' && i + 2 < key.size() && std::isxdigit(static_cast<unsigned char>(key[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(key[i + 2]))) {
      c = static_cast<char>(std::stoi(std::string(key.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    }
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

std::string RedactDatabase(const std::string& database) {
  const size_t scheme = database.find("://");
  if (scheme == std::string::npos) {
    return database.starts_with(kSqlitePrefix) ? database.substr(kSqlitePrefix.size()) : database;
  }
  // Any URL, a mistyped scheme too (mysql://u:pw@h): userinfo's password
  // becomes ***, each query value whose key names a password (password,
  // sslpassword) becomes ***, a fragment is dropped. The rest stays, so an
  // operator sees the hosts, the database and target_session_attrs.
  // Userinfo ends at the first '@' before any '/', as libpq reads it.
  const size_t start = scheme + 3;
  std::string out = database.substr(0, start);
  size_t hosts = start;
  if (const size_t at = database.find_first_of("@/", start); at != std::string::npos && database[at] == '@') {
    const std::string_view userinfo = std::string_view(database).substr(start, at - start);
    const size_t colon = userinfo.find(':');
    out += userinfo.substr(0, colon);
    if (colon != std::string_view::npos) out += ":***";
    out += '@';
    hosts = at + 1;
  }
  const size_t query = std::min(database.find_first_of("?#", hosts), database.size());
  out += database.substr(hosts, query - hosts);
  if (query < database.size() && database[query] == '?') {
    const size_t fragment = std::min(database.find('#', query), database.size());
    std::string_view params = std::string_view(database).substr(query + 1, fragment - query - 1);
    out += '?';
    for (size_t from = 0; from <= params.size();) {
      const size_t amp = std::min(params.find('&', from), params.size());
      const std::string_view param = params.substr(from, amp - from);
      if (from > 0) out += '&';
      const size_t eq = param.find('=');
      if (eq != std::string_view::npos && DecodedKey(param.substr(0, eq)).find("password") != std::string::npos) {
        out += std::string(param.substr(0, eq)) + "=***";
      } else {
        out += param;
      }
      from = amp + 1;
    }
  }
  return out;
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
