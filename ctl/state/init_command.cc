// rackgatectl init: database, appliance CA and serving certificate.
#include "ctl/state/init_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/files.h"
#include "core/secrets.h"
#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"
#include "core/pki.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using nlohmann::json;

constexpr char kInitHelp[] =
    "Usage: rackgatectl init --state-dir DIR [--database URL] [--name DNS]...\n"
    "         [--address IP]... [--renew-serving-cert] [--token-out FILE] [--json]\n"
    "\n"
    "Creates an appliance's state directory, offline (rackgated need not run):\n"
    "  DIR/rackgate.db          the enrollment database (SQLite, WAL), with a\n"
    "                           pool named \"default\" and its provisioning token,\n"
    "                           shown once (only its hash is stored)\n"
    "  DIR/ca/ca.crt, ca.key    the appliance CA (ECDSA P-256, 10 years): the\n"
    "                           trust anchor pointer configs carry\n"
    "  DIR/tls/server.crt, .key the HTTPS serving certificate (leaf + CA),\n"
    "                           for every --name and --address given\n"
    "Keys are written with mode 0600. Running init again is safe: an existing\n"
    "database is migrated, an existing CA is kept (never overwritten), the\n"
    "default pool keeps its token (no second one is made; `rackgatectl token\n"
    "rotate --pool default --grace 1h` makes a new one), and the serving\n"
    "certificate is only reissued with --renew-serving-cert: for the --name and\n"
    "--address given, or without them for the names the current one has. A\n"
    "first certificate without --name/--address is for localhost and 127.0.0.1.\n"
    "\n"
    "Several appliances on one PostgreSQL (docs/ha.md): --database\n"
    "postgresql://... creates the schema and the default pool there instead of\n"
    "DIR/rackgate.db. Only the first appliance creates the CA: on the others,\n"
    "copy the first one's DIR/ca/ca.crt and ca.key into DIR/ca first (init\n"
    "refuses to make a second CA for an existing fleet database), then run init\n"
    "with --database and --renew-serving-cert --name/--address of this\n"
    "appliance. The fleet's default pool keeps its token.\n"
    "\n"
    "Options:\n"
    "  --state-dir DIR         the state directory (rackgated's state_dir)\n"
    "  --database URL          the store (rackgated's \"database\"): a path,\n"
    "                          sqlite:PATH or postgresql://USER@HOST/DB;\n"
    "                          default DIR/rackgate.db\n"
    "  --name DNS              a DNS name of the serving certificate (repeatable)\n"
    "  --address IP            an IP address of the serving certificate (repeatable)\n"
    "  --renew-serving-cert    reissue the serving certificate\n"
    "  --token-out FILE        write the default pool's new token to FILE (mode\n"
    "                          0600) instead of printing it\n"
    "  --json                  print JSON instead of text\n"
    "\n"
    "Exit status: 0 done; 1 refused (ca_missing: a fleet database without its\n"
    "CA here; reason code on stderr); 2 unusable input or state (the message\n"
    "says which).\n";

bool Exists(const std::string& p) { return ::access(p.c_str(), F_OK) == 0; }

// The default pool's provisioning token: made when the pool is created (or
// has none while it requires one), never a second time. "made" (and the
// token), "kept" or "off".
struct DefaultPool {
  bool created = false;
  std::string token_state;
  std::optional<std::string> token;
};

Result<DefaultPool> EnsureDefaultPool(storage::Store* store, int64_t now) {
  DefaultPool out;
  storage::Pool pool;
  pool.name = "default";
  bool existed = false;
  if (auto existing = store->GetPool("default"); existing.ok()) {
    pool = *existing;
    existed = true;
  } else if (existing.status().code() != Status::Code::kNotFound) {
    return existing.status();
  }
  if (!pool.token_required) {
    out.token_state = "off";
    return out;
  }
  // An existing pool with a valid token (a second appliance, init run
  // again) is left as it is: no write, no audit row.
  if (existed) {
    auto tokens = store->ValidPoolTokens("default", now);
    if (!tokens.ok()) return tokens.status();
    if (!tokens->empty()) {
      out.token_state = "kept";
      return out;
    }
  }
  const std::string token = core::NewToken();
  storage::PoolPutOutcome outcome;
  auto put = store->PutPool(pool, storage::Actor{"rackgatectl init", "initial pool and its provisioning token"}, now,
                            core::TokenHash(token), {}, &outcome);
  if (!put.ok()) return put.status();
  out.created = outcome.created;
  out.token_state = outcome.token_created ? "made" : "kept";
  if (outcome.token_created) out.token = token;
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The serving certificate's names, settled before anything is written: a
// renewal that cannot read the current names changes nothing. --name and
// --address, else (when issuing) the current certificate's, else localhost.
Result<core::ServingCertOptions> ServingNames(const Args& args, const std::string& crt, bool issue) {
  core::ServingCertOptions names;
  names.dns_names = args.GetAll("name");
  names.ip_addresses = args.GetAll("address");
  if (!issue || !names.dns_names.empty() || !names.ip_addresses.empty()) return names;
  if (!Exists(crt)) {
    names.dns_names = {"localhost"};
    names.ip_addresses = {"127.0.0.1"};
    return names;
  }
  auto current = core::ReadServingCertNames(crt);
  if (!current.ok()) {
    return Status::InvalidArgument(current.status().reason(),
                                   current.status().message() +
                                       "; give the names to renew it for with --name DNS and --address IP");
  }
  names.dns_names = current->dns_names;
  names.ip_addresses = current->ip_addresses;
  return names;
}

// A second appliance of a fleet: the database has the fleet's default
// pool, so it has a CA already, the one every pointer config carries. A
// new CA here would split the fleet: refused (ca_missing) before anything
// is written.
Status CheckFleetCa(storage::Store* store, const std::string& dir, const std::string& shown) {
  if (auto existing = store->GetPool("default"); !existing.ok()) return Status::Ok();
  return Status::Unsupported("ca_missing", "the fleet database " + shown + " is initialised already, and " + dir +
                                               "/ca has no CA: copy the first appliance's ca/ca.crt "
                                               "and ca/ca.key into " + dir +
                                               "/ca (mode 0600, owner rackgate; docs/ha.md), then run "
                                               "init again");
}

// Creates the appliance CA when neither half exists. Returns whether it did;
// pki_invalid when only one half is there.
Result<bool> EnsureCa(const std::string& dir, const std::string& ca_crt, const std::string& ca_key) {
  if (!Exists(ca_crt) && !Exists(ca_key)) {
    if (Status s = core::CreateCa({}, ca_crt, ca_key); !s.ok()) return s;
    return true;
  }
  if (!Exists(ca_crt) || !Exists(ca_key)) {
    return Status::InvalidArgument("pki_invalid", "only half of the appliance CA exists in " + dir +
                                                      "/ca; restore the other half from a backup");
  }
  return false;
}

// Puts the default pool's new token in the report, or in --token-out's file
// (then the report names the file). Returns why the file could not be
// written, when it could not: the token is stored already, so the report
// shows it rather than lose it.
std::optional<std::string> ReportToken(const Args& args, const std::string& token, json* report) {
  auto out = args.Get("token-out");
  if (!out) {
    (*report)["default_pool_token"] = token;
    return std::nullopt;
  }
  const std::string line = token + "\n";
  Status s = WriteFileAtomic(*out, std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
  if (s.ok()) {
    (*report)["token_file"] = *out;
    return std::nullopt;
  }
  (*report)["default_pool_token"] = token;
  return s.message();
}

// init's report as text; `shown` is the database, password redacted.
void PrintInitText(const json& report, const std::string& shown, const DefaultPool& pool,
                   const core::ServingCertOptions& names) {
  const json& ca = report.at("ca");
  const json& serving = report.at("serving");
  std::printf("database:   %s (schema version %d)\n", shown.c_str(), storage::Store::CurrentSchemaVersion());
  std::printf("CA:         %s (sha256 %s%s)\n", Str(ca, "certificate").c_str(), Str(ca, "sha256").c_str(),
              ca.at("created").get<bool>() ? ", created" : ", kept");
  std::vector<std::string> all = names.dns_names;
  all.insert(all.end(), names.ip_addresses.begin(), names.ip_addresses.end());
  std::printf("serving:    %s (%s) for %s\n", Str(serving, "certificate").c_str(),
              serving.at("issued").get<bool>() ? "issued now" : "kept; --renew-serving-cert reissues it",
              Join(all).c_str());
  if (pool.token_state == "kept") {
    std::printf("pool \"default\": provisioning token kept (`rackgatectl token rotate --pool default --grace 1h` "
                "makes a new one)\n");
  } else if (pool.token_state == "off") {
    std::printf("pool \"default\": no provisioning token required\n");
  } else if (report.contains("token_file")) {
    std::printf("provisioning token for pool \"default\" written to %s (mode 0600)\n",
                report.at("token_file").get<std::string>().c_str());
  } else {
    std::printf("provisioning token for pool \"default\" (shown once): %s\n", pool.token->c_str());
  }
}

}  // namespace

int RunInit(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"state-dir", "name", "address", "token-out", "database"}, {"renew-serving-cert", "json"}, 0});
  if (!args.ok()) return UsageError(kInitHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kInitHelp);
  if (Status s = args->Require({"state-dir"}); !s.ok()) return UsageError(kInitHelp, s.message());
  const std::string dir = *args->Get("state-dir");
  // Unusable input or state (exit 2): what was given, or what is there,
  // cannot be used as it is.
  auto fail = [](const Status& s) { return Fail("init", s, kExitUnusable); };
  if (::mkdir(dir.c_str(), 0750) != 0 && errno != EEXIST) {
    return fail(Status::IoError("file_unwritable", "cannot create " + dir + ": " + std::strerror(errno)));
  }
  // Before anything else, one clear failure (Fail names the user to run
  // as) rather than whichever file happens to be unreadable first.
  if (::access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
    return fail(Status::IoError("file_unwritable", dir + ": " + std::strerror(errno)));
  }
  json report = {{"state_dir", dir}};
  const std::string crt = dir + "/tls/server.crt", key = dir + "/tls/server.key";
  const bool issue = !Exists(crt) || !Exists(key) || args->Has("renew-serving-cert");
  auto names = ServingNames(*args, crt, issue);
  if (!names.ok()) return fail(names.status());

  // fleet: the store the appliance's config names (docs/ha.md).
  // SECURITY: `database` may hold a password: output shows storage::RedactDatabase.
  const std::string database = args->Get("database").value_or(dir + "/rackgate.db");
  const bool fleet_database = storage::IsServerDatabase(database);
  const std::string shown = storage::RedactDatabase(database);
  auto store = storage::OpenStore(database);
  if (!store.ok()) return fail(store.status().Annotate(shown));
  const std::string ca_crt = dir + "/ca/ca.crt", ca_key = dir + "/ca/ca.key";
  // Everything given is usable; init says no (exit 1, docs/cli.md): a
  // refusal, not unusable input.
  if (fleet_database && !Exists(ca_crt) && !Exists(ca_key)) {
    if (Status s = CheckFleetCa(store->get(), dir, shown); !s.ok()) return Fail("init", s, kExitRefused);
  }
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  auto pool = EnsureDefaultPool(store->get(), now);
  if (!pool.ok()) return fail(pool.status());
  report["database"] = {{fleet_database ? "url" : "path", shown},
                        {"schema_version", storage::Store::CurrentSchemaVersion()}};

  auto ca_created = EnsureCa(dir, ca_crt, ca_key);
  if (!ca_created.ok()) return fail(ca_created.status());
  auto fp = core::CertificateFingerprint(ca_crt);
  if (!fp.ok()) return fail(fp.status());
  report["ca"] = {{"certificate", ca_crt}, {"key", ca_key}, {"sha256", *fp}, {"created", *ca_created}};

  if (issue) {
    if (Status s = core::IssueServingCertificate(*names, ca_crt, ca_key, crt, key); !s.ok()) return fail(s);
  } else if (auto current = core::ReadServingCertNames(crt); current.ok()) {
    *names = *current;
  }
  report["serving"] = {{"certificate", crt},
                       {"key", key},
                       {"issued", issue},
                       {"dns_names", names->dns_names},
                       {"ip_addresses", names->ip_addresses}};

  report["default_pool"] = {{"name", "default"}, {"created", pool->created}, {"token", pool->token_state}};
  std::optional<std::string> token_file_error;
  if (pool->token) token_file_error = ReportToken(*args, *pool->token, &report);

  if (args->Has("json")) {
    PrintJson(report);
  } else {
    PrintInitText(report, shown, *pool, *names);
  }
  if (token_file_error) {
    std::fprintf(stderr, "rackgatectl init: error: cannot write the token to %s: %s; it is printed above (shown "
                 "once)\n", args->Get("token-out")->c_str(), token_file_error->c_str());
    return kExitUnusable;
  }
  return kExitOk;
}

}  // namespace rackgate::ctl
