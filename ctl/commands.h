// rackgatectl's admin API commands, one block per file, each file named as
// its resource is in wire/admin_* and core/*_service (docs/cli.md, "Where
// each command lives"). `socket` is the admin socket path (--socket, default
// /run/rackgate/admin.sock); argv[first] is the first argument after the
// command word(s). Each returns the exit code (ctl/command_line.h): 0 done,
// 1 refused by the daemon (reason on stderr), 2 unusable input or daemon
// unreachable.
#ifndef RACKGATE_CTL_COMMANDS_H_
#define RACKGATE_CTL_COMMANDS_H_

#include <string>

#include "base/status.h"
#include "ctl/args.h"
#include "ctl/audit_verify.h"
#include "wire/admin_machines.h"

namespace rackgate::ctl {

// ctl/machine_commands.cc: enroll, list, show, approve, revoke, reset,
// delete, rename (docs/operations.md, docs/lifecycle.md).
int RunEnroll(const std::string& socket, int argc, char** argv, int first);
int RunList(const std::string& socket, int argc, char** argv, int first);
int RunShow(const std::string& socket, int argc, char** argv, int first);
// approve, revoke, reset: `verb` is the command word.
int RunMachineAction(const std::string& verb, const std::string& socket, int argc, char** argv, int first);
// The body of revoke or reset from its parsed command line: kInvalidArgument
// ("usage") for anything but one HOSTNAME, and for a revoke without a
// --reason (or a blank one); reset's --unrevoke as given.
Result<wire::ReasonRequest> MachineActionRequest(const std::string& verb, const Args& args);
// Discovery: `approve HOSTNAME --hostname NEW --pool P --address KIND=VALUE`.
int RunApprove(const std::string& socket, int argc, char** argv, int first);
// `delete HOSTNAME`: an operator's way out of a hostname typo or a machine
// that left the rack; refused: machine_active, hostname_unknown.
int RunDelete(const std::string& socket, int argc, char** argv, int first);
// `rename OLD NEW`; refused as delete, also hostname_taken, hostname_invalid.
int RunRename(const std::string& socket, int argc, char** argv, int first);

// ctl/machine_import.cc: `import FILE [--dry-run]`, an inventory (CSV or
// JSON) enrolled in one transaction (docs/inventory.md).
int RunImport(const std::string& socket, int argc, char** argv, int first);

// ctl/pool_commands.cc: `pool put|show|diff|remove-template` (argv[first] is
// the subcommand) and `token rotate --pool POOL --grace DURATION`.
int RunPool(const std::string& socket, int argc, char** argv, int first);
int RunToken(const std::string& socket, int argc, char** argv, int first);

// ctl/certificate_commands.cc: `certs`, the kubelet certificates signed.
int RunCerts(const std::string& socket, int argc, char** argv, int first);

// ctl/csr_commands.cc: manual CSR approval, `csr list|approve|deny`.
int RunCsr(const std::string& socket, int argc, char** argv, int first);

// ctl/event_commands.cc: `events`, webhook events and their deliveries
// (docs/events.md).
int RunEvents(const std::string& socket, int argc, char** argv, int first);

// ctl/audit_commands.cc: `audit`, the latest entries of the audit log, and
// `audit verify [--anchor ID:HASH]` through the admin API (docs/audit.md);
// `request` is parsed by ParseAuditVerify and has no --database (that one
// runs in rackgatectl-state: ctl/state/audit_file_command.h). audit verify
// exits 1 on audit_chain_broken (the first bad row on stderr), 2 when
// rackgated is unreachable or refuses otherwise.
int RunAudit(const std::string& socket, int argc, char** argv, int first);
int RunAuditVerify(const std::string& socket, const AuditVerifyRequest& request);

// ctl/status_commands.cc: `status`, the appliance at a glance.
int RunStatus(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_CTL_COMMANDS_H_
