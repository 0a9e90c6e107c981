// rackgatectl's boot policy commands against the daemon (docs/policy.md,
// "From observation to enforcement"): `policy observe`, `enforce`,
// `propose`, `accept`, `put`, `show`. `policy check` is offline
// (eventlog_commands.h). Each returns the process exit code: 0 done, 1
// refused by the daemon, 2 unusable input or usage.
#ifndef RACKGATE_DAEMON_CTL_POLICY_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_POLICY_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// argv[first] is the subcommand (observe, enforce, propose, accept, put, show).
int RunPolicyAdmin(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_POLICY_COMMANDS_H_
