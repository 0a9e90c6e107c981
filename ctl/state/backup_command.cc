// rackgatectl backup and restore (docs/operations.md, "Backups and restore").
#include "ctl/state/backup_command.h"

#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "ctl/admin_util.h"
#include "ctl/args.h"
#include "ctl/json_util.h"
#include "ctl/offline.h"
#include "ctl/state/backup_archive.h"

namespace rackgate::ctl {

namespace {

using json = nlohmann::json;

constexpr char kDefaultConfig[] = "/etc/rackgate/rackgated.json";

constexpr char kBackupHelp[] =
    "Usage: rackgatectl backup --out FILE [--config FILE] [--state-dir DIR] [--json]\n"
    "\n"
    "Writes one archive (tar, mode 0600, written atomically) of a running\n"
    "appliance: the store (an online, consistent copy with SQLite's backup\n"
    "API, while rackgated keeps working), the appliance CA and serving key\n"
    "(STATE/ca, STATE/tls), the cluster CA (STATE/cluster-ca), the config and\n"
    "every file the config names (EK anchors, a database password file,\n"
    "webhook secrets), with a manifest: format, rackgate version, time, the\n"
    "appliance's names, the store's kind and schema version, the audit chain's\n"
    "head, and each file's size, mode and SHA-256. On PostgreSQL the database\n"
    "is not in the archive: back it up with pg_dump beside it (the manifest\n"
    "says so). The archive holds the CA keys: keep it as you keep them.\n"
    "Progress goes to stderr.\n"
    "\n"
    "Options:\n"
    "  --out FILE        the archive to write\n"
    "  --config FILE     rackgated's config (default /etc/rackgate/rackgated.json)\n"
    "  --state-dir DIR   the state directory (default: the config's state_dir)\n"
    "  --json            print the manifest as one JSON document\n"
    "\n"
    "Exit status: 0 written; 2 unusable input, or a file or the store that\n"
    "cannot be read.\n";

constexpr char kRestoreHelp[] =
    "Usage: rackgatectl restore --from FILE [--state-dir DIR] [--config-out FILE]\n"
    "         [--rebase DIR] [--force] [--json]\n"
    "\n"
    "Restores an archive `rackgatectl backup` wrote onto a fresh appliance.\n"
    "First it checks the whole archive (every file's size and SHA-256 against\n"
    "the manifest, none missing, none extra) and the target, and writes\n"
    "nothing when a check fails. Then it writes the store, the state folders,\n"
    "the config and the files the config named, with their modes (keys and the\n"
    "store 0600) and, run as root, the rackgate user as owner of the state;\n"
    "the config's state_dir becomes --state-dir; a config (or a file it\n"
    "names) already there that differs is kept as NAME.before-restore. It\n"
    "prints the audit chain's head it restored, checked against the\n"
    "manifest's, and records the restore in the audit log (backup_restored).\n"
    "rackgated must not run on the target. On PostgreSQL, restore the database\n"
    "with pg_restore first.\n"
    "\n"
    "Options:\n"
    "  --from FILE       the archive\n"
    "  --state-dir DIR   where the state goes (default: the backed-up one)\n"
    "  --config-out FILE where the config goes (default: where the backed-up\n"
    "                    appliance had it, e.g. /etc/rackgate/rackgated.json)\n"
    "  --rebase DIR      put the files the config names outside the state\n"
    "                    directory under DIR (their path appended), and name\n"
    "                    them there in the config\n"
    "  --force           restore over a target that has state (a store, files\n"
    "                    in STATE/ca, tls, cluster-ca): they are moved to\n"
    "                    NAME.before-restore; never while rackgated runs\n"
    "  --json            print the result as one JSON document\n"
    "\n"
    "Exit status: 0 restored; 1 refused (backup_damaged, backup_foreign,\n"
    "backup_newer, restore_target_not_empty, db_in_use; reason code on\n"
    "stderr); 2 unusable input.\n";

void Progress(const char* cmd, const std::string& line) { std::fprintf(stderr, "%s: %s\n", cmd, line.c_str()); }

int ExitFor(const Status& s) {
  const std::string& r = s.reason();
  if (r == "backup_damaged" || r == "backup_foreign" || r == "backup_newer" || r == "restore_target_not_empty" ||
      r == "db_in_use") {
    return kExitRefused;
  }
  return kExitUnusable;
}

std::string HeadText(const json& audit) {
  return std::to_string(audit.value("head_id", int64_t{0})) + ":" + audit.value("head_hash", std::string());
}

}  // namespace

int RunBackup(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"out", "config", "state-dir"}, {"json"}, 0});
  if (!args.ok()) return UsageError(kBackupHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kBackupHelp);
  if (Status s = args->Require({"out"}); !s.ok()) return UsageError(kBackupHelp, s.message());
  BackupOptions options;
  options.out = *args->Get("out");
  options.config_path = args->Get("config").value_or(kDefaultConfig);
  options.state_dir = args->Get("state-dir").value_or("");
  options.now = static_cast<int64_t>(std::time(nullptr));
  options.progress = [](const std::string& line) { Progress("backup", line); };
  auto report = CreateBackup(options);
  if (!report.ok()) return Fail("backup", report.status(), ExitFor(report.status()));
  const json& m = report->manifest;
  if (args->Has("json")) {
    PrintJson({{"out", options.out}, {"bytes", report->bytes}, {"manifest", m}});
    return kExitOk;
  }
  std::printf("wrote %s (%lld bytes, mode 0600): %zu files\n", options.out.c_str(),
              static_cast<long long>(report->bytes), m.at("files").size());
  const json& store = m.at("store");
  if (store.value("included", false)) {
    std::printf("store: SQLite %s, schema version %d\n", Str(store, "path").c_str(),
                store.at("schema_version").get<int>());
  } else {
    std::printf("store: PostgreSQL %s, schema version %d, NOT in the archive: %s\n", Str(store, "database").c_str(),
                store.at("schema_version").get<int>(), Str(store, "take").c_str());
  }
  std::printf("audit chain head: %s (%lld rows)\n", HeadText(m.at("audit")).c_str(),
              static_cast<long long>(m.at("audit").value("rows", int64_t{0})));
  return kExitOk;
}

int RunRestore(int argc, char** argv, int first) {
  auto args = Args::Parse(argc, argv, first, {{"from", "state-dir", "config-out", "rebase"}, {"force", "json"}, 0});
  if (!args.ok()) return UsageError(kRestoreHelp, args.status().message());
  if (args->Has("help")) return PrintHelp(kRestoreHelp);
  if (Status s = args->Require({"from"}); !s.ok()) return UsageError(kRestoreHelp, s.message());
  RestoreOptions options;
  options.archive = *args->Get("from");
  options.state_dir = args->Get("state-dir").value_or("");
  options.config_out = args->Get("config-out").value_or("");
  options.rebase = args->Get("rebase").value_or("");
  options.force = args->Has("force");
  options.progress = [](const std::string& line) { Progress("restore", line); };
  auto report = RestoreBackup(options);
  if (!report.ok()) return Fail("restore", report.status(), ExitFor(report.status()));
  const json& m = report->manifest;
  if (args->Has("json")) {
    PrintJson({{"state_dir", report->state_dir},
               {"config", report->config_path},
               {"store", report->store_path},
               {"files", report->written},
               {"owner_rackgate", report->owner_set},
               {"set_aside", report->set_aside},
               {"audit", report->audit},
               {"manifest_audit", m.at("audit")},
               {"created_at", m.value("created_at", std::string())}});
    return kExitOk;
  }
  std::printf("restored the backup of %s (rackgate %s) into %s: %zu files, config %s\n",
              m.value("created_at", std::string("?")).c_str(), m.value("rackgate_version", std::string("?")).c_str(),
              report->state_dir.c_str(), report->written.size(), report->config_path.c_str());
  for (const auto& aside : report->set_aside) std::printf("kept the file that was there as %s\n", aside.c_str());
  if (report->store_path.empty()) {
    std::printf("store: PostgreSQL, not in the archive: restore it with pg_restore, then check its audit chain "
                "with `rackgatectl audit verify --anchor %s`\n",
                HeadText(m.at("audit")).c_str());
  } else {
    std::printf("audit chain head restored: %s (%lld rows), %s\n", HeadText(report->audit).c_str(),
                static_cast<long long>(report->audit.value("rows", int64_t{0})),
                report->audit.value("matches_manifest", false) ? "the same as the backup's manifest"
                                                               : "DIFFERENT from the backup's manifest");
    if (report->audit.contains("recorded")) {
      std::printf("the restore is audit row %lld (backup_restored)\n",
                  static_cast<long long>(report->audit.at("recorded").value("id", int64_t{0})));
    }
  }
  std::printf("next: start rackgated (`systemctl start rackgated`)\n");
  return report->audit.is_null() || report->audit.value("matches_manifest", false) ? kExitOk : kExitRefused;
}

}  // namespace rackgate::ctl
