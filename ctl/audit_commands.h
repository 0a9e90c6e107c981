// rackgatectl audit verify: walks the audit log's hash chain (docs/audit.md).
#ifndef RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_

#include <string>

namespace rackgate::ctl {

// `rackgatectl audit verify [--database PATH] [--json]`: through rackgated,
// or with --database on the SQLite file read-only (rackgated may be down).
// Exit 0 chain intact; 1 audit_chain_broken (the first bad row on stderr);
// 2 unusable input, database unreadable or rackgated unreachable.
int RunAuditVerify(const std::string& socket, int argc, char** argv, int first);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_
