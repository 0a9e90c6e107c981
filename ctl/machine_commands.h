// rackgatectl's machine commands over the admin API (wire/admin_machines.h,
// core/machine_service.h): enroll, list, show, approve, revoke, reset,
// delete, rename (docs/operations.md, docs/lifecycle.md). Each returns the
// exit code: 0 done, 1 refused by the daemon (reason on stderr), 2 unusable
// input or daemon unreachable.
#ifndef RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_

#include <string>

#include "base/status.h"
#include "ctl/args.h"
#include "wire/admin_machines.h"

namespace rackgate::ctl {

// `socket` is the admin socket path (--socket, default /run/rackgate/admin.sock).
// argv[first] is the first argument after the command word(s).
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
// `rackgatectl delete HOSTNAME [--reason TEXT] [--json]`: an operator's way
// out of a hostname typo or a machine that left the rack. Exit 0 deleted;
// 1 refused (machine_active, hostname_unknown); 2 unusable input or
// rackgated unreachable.
int RunDelete(const std::string& socket, int argc, char** argv, int first);
// `rackgatectl rename OLD NEW [--reason TEXT] [--json]`. Exit codes as RunDelete
// (also hostname_taken, hostname_invalid).
int RunRename(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_
