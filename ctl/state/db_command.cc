// rackgatectl db migrate: a stopped appliance's SQLite store copied into an
// empty PostgreSQL database (docs/ha.md, "Moving an appliance from SQLite to PostgreSQL").
#include "ctl/state/db_command.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "ctl/admin_util.h"
#include "ctl/json_util.h"
#include "ctl/args.h"
#include "ctl/offline.h"
#include "storage/copy.h"
#include "storage/store.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;

constexpr char kDefaultStateDir[] = "/var/lib/rackgate";

constexpr char kDbHelp[] =
    "Usage: rackgatectl db COMMAND ...\n"
    "\n"
    "The appliance's database, offline (rackgated stopped). Commands:\n"
    "  migrate          copy the SQLite store into an empty PostgreSQL database\n"
    "Run `rackgatectl db migrate --help` for its options.\n"
    "\n"
    "Options:\n"
    "  --help           this text\n"
    "\n"
    "Exit status: 0 done; 1 refused (reason code on stderr); 2 unusable input.\n";

constexpr char kMigrateHelp[] =
    "Usage: rackgatectl db migrate --to URL [--from PATH | --state-dir DIR] [--dry-run] [--json]\n"
    "\n"
    "Copies every table of a stopped appliance's SQLite store into an empty\n"
    "PostgreSQL database, in one transaction: machines, pools, tokens,\n"
    "certificates, attestations, events and their deliveries, reports, CSR\n"
    "requests and the audit log with its hash chain, ids kept. Creates the\n"
    "schema when the database has none; refuses (target_not_empty) a database\n"
    "with any row in a rackgate table, writing nothing. Then checks, before it\n"
    "commits, that every table has as many rows as in the source and that the\n"
    "audit chain verifies with the same head hash. rackgated must be stopped:\n"
    "the admin socket must not answer and no process may have the file open.\n"
    "Progress goes to stderr, the summary to stdout. The URL's password is\n"
    "never printed. Afterwards, set \"database\" in rackgated's config to the URL\n"
    "and start it.\n"
    "\n"
    "Options:\n"
    "  --to URL          the PostgreSQL database: postgresql://USER@HOST/DB...\n"
    "                    (a password is better in ~/.pgpass or $PGPASSWORD)\n"
    "  --from PATH       the SQLite store (default STATE_DIR/rackgate.db)\n"
    "  --state-dir DIR   the appliance's state directory (default /var/lib/rackgate)\n"
    "  --dry-run         copy and check everything, then roll back: nothing written\n"
    "  --json            print the summary as one JSON document\n"
    "\n"
    "Exit status: 0 copied (or checked, with --dry-run); 1 refused (rackgated\n"
    "running, target_not_empty, db_schema_old, copy_mismatch; reason code on\n"
    "stderr); 2 unusable input or a database that cannot be reached.\n";

// Refusals of a sound request exit 1; what cannot be used or reached, 2.
int ExitFor(const Status& s) {
  const std::string& r = s.reason();
  if (r == "target_not_empty" || r == "db_in_use" || r == "db_schema_old" || r == "db_newer_than_code" ||
      r == "db_not_rackgate" || r == "copy_mismatch") {
    return kExitRefused;
  }
  return kExitUnusable;
}

json ChainJson(const storage::AuditChainReport& r) {
  return {{"rows", r.rows}, {"head_id", r.head_id}, {"head_hash", r.head_hash}, {"intact", r.intact}};
}

int RunMigrate(const std::string& socket, int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"to", "from", "state-dir"}, {"dry-run", "json"}, 0});
  if (!args.ok()) return UsageError(kMigrateHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kMigrateHelp);
  if (Status s = args->Require({"to"}); !s.ok()) return UsageError(kMigrateHelp, s.message());
  if (args->Has("from") && args->Has("state-dir")) {
    return UsageError(kMigrateHelp, "give --from PATH or --state-dir DIR, not both");
  }
  const std::string url = *args->Get("to");
  if (!storage::IsServerDatabase(url)) {
    return UsageError(kMigrateHelp, "--to takes a postgresql:// URL, got '" + storage::RedactDatabase(url) + "'");
  }
  const std::string shown = storage::RedactDatabase(url);
  const std::string source =
      args->Get("from").value_or(args->Get("state-dir").value_or(kDefaultStateDir) + "/rackgate.db");
  const bool as_json = args->Has("json");
  const char* cmd = "db migrate";

  // Offline only: the copy is of one moment, and rackgated writing meanwhile
  // would be lost. Two checks, each named when it refuses.
  if (SocketAnswers(socket)) {
    return Fail(cmd,
                Status::Unsupported("daemon_running", "rackgated answers on its admin socket " + socket +
                                                          ": stop it (`systemctl stop rackgated`) and run this again"),
                kExitRefused);
  }
  storage::CopyOptions options;
  options.dry_run = args->Has("dry-run");
  std::string last_line;
  options.progress = [&last_line](const std::string& table, int64_t done, int64_t total) {
    // The start of a table is no news (an empty one says so once, at its
    // end); its end and every 10000 rows are.
    const std::string line = table + ":" + std::to_string(done);
    if ((done == 0 && total > 0) || line == last_line) return;
    last_line = line;
    std::fprintf(stderr, "copying %s: %lld/%lld\n", table.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total));
  };
  auto report = storage::CopyDatabase(source, url, options);
  if (!report.ok()) return Fail(cmd, report.status(), ExitFor(report.status()));

  if (as_json) {
    json tables = json::array();
    for (const auto& t : report->tables) {
      tables.push_back({{"table", t.table}, {"source_rows", t.source_rows}, {"target_rows", t.target_rows}});
    }
    PrintJson({{"source", source},
               {"target", shown},
               {"dry_run", report->dry_run},
               {"schema_version", report->schema_version},
               {"tables", tables},
               {"audit", ChainJson(report->target_audit)}});
    return kExitOk;
  }
  Table table({"TABLE", "SOURCE", "TARGET"});
  for (const auto& t : report->tables) {
    table.Add({t.table, std::to_string(t.source_rows), std::to_string(t.target_rows)});
  }
  table.Print();
  const auto& chain = report->target_audit;
  std::printf("audit chain: %lld rows, head %lld:%s, the same as the source's%s\n",
              static_cast<long long>(chain.rows), static_cast<long long>(chain.head_id), chain.head_hash.c_str(),
              chain.intact ? "" : " (broken in the source too: `rackgatectl audit verify` says where)");
  if (report->dry_run) {
    std::printf("dry run: %s copied and checked into %s, then rolled back; nothing written\n", source.c_str(),
                shown.c_str());
  } else {
    std::printf("copied %s into %s (schema version %d)\n", source.c_str(), shown.c_str(), report->schema_version);
    std::printf("next: set \"database\" in rackgated's config to the URL, start rackgated, and keep %s as a backup\n",
                source.c_str());
  }
  return kExitOk;
}

}  // namespace

int RunDb(const std::string& socket, int argc, char** argv, int first) {
  if (argc <= first) return UsageError(kDbHelp, "give a db command");
  const std::string sub = argv[first];
  if (sub == "--help") return PrintHelp(kDbHelp);
  if (sub == "migrate") return RunMigrate(socket, argc, argv, first + 1);
  return UsageError(kDbHelp, "unknown db command '" + sub + "'" + DidYouMean(sub, {"migrate"}));
}

}  // namespace rackgate::ctl
