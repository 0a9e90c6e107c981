// rackgatectl's commands that talk to rackgated's admin API (docs/operations.md):
// enroll, import, list, show, approve, revoke, reset, audit, status, pool.
// Each returns the exit code: 0 done, 1 refused by the daemon (reason on
// stderr), 2 unusable input or daemon unreachable.
#ifndef RACKGATE_DAEMON_CTL_ADMIN_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_ADMIN_COMMANDS_H_

#include <string>

#include "base/status.h"
#include "ctl/args.h"
#include "wire/admin_machines.h"

namespace rackgate::ctl {

// `socket` is the admin socket path (--socket, default /run/rackgate/admin.sock).
// argv[first] is the first argument after the command word(s).
int RunEnroll(const std::string& socket, int argc, char** argv, int first);
int RunImport(const std::string& socket, int argc, char** argv, int first);
int RunList(const std::string& socket, int argc, char** argv, int first);
int RunShow(const std::string& socket, int argc, char** argv, int first);
// approve, revoke, reset: `verb` is the command word.
// The body of revoke or reset from its parsed command line: kInvalidArgument
// ("usage") for anything but one HOSTNAME, and for a revoke without a
// --reason (or a blank one); reset's --unrevoke as given.
Result<wire::ReasonRequest> MachineActionRequest(const std::string& verb, const Args& args);
int RunMachineAction(const std::string& verb, const std::string& socket, int argc, char** argv, int first);
int RunAudit(const std::string& socket, int argc, char** argv, int first);
int RunStatus(const std::string& socket, int argc, char** argv, int first);
int RunPool(const std::string& socket, int argc, char** argv, int first);
int RunToken(const std::string& socket, int argc, char** argv, int first);
int RunCerts(const std::string& socket, int argc, char** argv, int first);
// events: webhook events and their deliveries (docs/events.md).
int RunEvents(const std::string& socket, int argc, char** argv, int first);
// Manual CSR approval and discovery: `csr list|approve|deny`, and
// `approve HOSTNAME --hostname NEW --pool P --address KIND=VALUE`.
int RunCsr(const std::string& socket, int argc, char** argv, int first);
int RunApprove(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_ADMIN_COMMANDS_H_
