// rackgatectl's measured-boot commands: `eventlog replay`, `eventlog show` and
// `policy check`, offline, built on attest/eventlog.h, boot_facts.h and
// boot_policy.h. Each returns the process exit code (ctl/offline.h):
// 0 ok, 1 refused (every reason on stderr), 2 unusable input or usage.
#ifndef RACKGATE_DAEMON_CTL_EVENTLOG_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_EVENTLOG_COMMANDS_H_

namespace rackgate::ctl {

// rackgatectl eventlog replay FILE [--json]   (argv[first] is FILE or a flag)
int RunEventlogReplay(int argc, char** argv, int first);
// rackgatectl eventlog show FILE
int RunEventlogShow(int argc, char** argv, int first);
// rackgatectl policy check --policy P.json --eventlog FILE [...]
int RunPolicyCheck(int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_EVENTLOG_COMMANDS_H_
