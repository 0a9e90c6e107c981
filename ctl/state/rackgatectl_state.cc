// rackgatectl-state: the rackgatectl commands on an appliance's state
// directory, its database and CA keys: init, db, ca, backup, restore and
// audit verify --database. rackgatectl executes it with its own argv (ctl/state_exec.h),
// so that rackgatectl links neither the store, SQLite nor libpq; operators
// never run it by hand (docs/cli.md, "Two binaries").
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "ctl/state/audit_file_command.h"
#include "ctl/state/backup_command.h"
#include "ctl/audit_verify.h"
#include "ctl/state/ca_command.h"
#include "ctl/command_line.h"
#include "ctl/state/db_command.h"
#include "ctl/state/init_command.h"
#include "ctl/offline.h"

namespace {

int Dispatch(int argc, char** argv) {
  using namespace rackgate::ctl;  // NOLINT
  auto line = ParseCommandLine(argc, argv);
  if (!line) return kExitUnusable;
  const std::string cmd = line->args.empty() ? "" : line->args[1];
  argc = line->argc();
  argv = line->argv();
  if (cmd == "init") return RunInit(argc, argv, 2);
  if (cmd == "db") return RunDb(line->socket, argc, argv, 2);
  if (cmd == "ca") return RunCa(argc, argv, 2);
  if (cmd == "backup") return RunBackup(argc, argv, 2);
  if (cmd == "restore") return RunRestore(argc, argv, 2);
  if (cmd == "audit" && argc >= 3 && !std::strcmp(argv[2], "verify")) {
    AuditVerifyRequest request;
    if (int rc = ParseAuditVerify(argc, argv, 3, &request); rc >= 0) return rc;
    if (request.database) return RunAuditVerifyFile(request);
  }
  std::fputs("rackgatectl-state: run by rackgatectl for init, db, ca, backup, restore and audit verify --database;\n"
             "Run 'rackgatectl --help' for the commands.\n",
             stderr);
  return kExitUnusable;
}

}  // namespace

int main(int argc, char** argv) { return rackgate::ctl::RunMain(Dispatch, argc, argv); }
