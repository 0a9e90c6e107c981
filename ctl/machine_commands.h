// rackgatectl delete and rename: an operator's way out of a hostname typo or
// a machine that left the rack (docs/lifecycle.md, "Delete and rename").
#ifndef RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// `rackgatectl delete HOSTNAME [--reason TEXT] [--json]`. Exit 0 deleted;
// 1 refused (machine_active, hostname_unknown); 2 unusable input or
// rackgated unreachable.
int RunDelete(const std::string& socket, int argc, char** argv, int first);
// `rackgatectl rename OLD NEW [--reason TEXT] [--json]`. Exit codes as RunDelete
// (also hostname_taken, hostname_invalid).
int RunRename(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_MACHINE_COMMANDS_H_
