// rackgatectl's audit commands over the admin API (wire/admin_audit.h,
// core/audit_service.h): the latest entries, and the hash chain's
// verification (docs/audit.md).
#ifndef RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_
#define RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_

#include <string>

#include "ctl/audit_verify.h"

namespace rackgate::ctl {

// `rackgatectl audit [--hostname NAME] [--limit N] [--json]`: the latest
// entries of the audit log. Exit 0 shown; 1 refused; 2 unusable input or
// rackgated unreachable.
int RunAudit(const std::string& socket, int argc, char** argv, int first);
// `rackgatectl audit verify [--anchor ID:HASH] [--json]` through the admin
// API; `request` is parsed by ParseAuditVerify and has no --database (that
// one runs in rackgatectl-state: ctl/state/audit_file_command.h).
// Exit 0 chain intact; 1 audit_chain_broken (the first bad row on stderr);
// 2 rackgated unreachable or another refusal.
int RunAuditVerify(const std::string& socket, const AuditVerifyRequest& request);

}  // namespace rackgate::ctl

#endif  // RACKGATE_DAEMON_CTL_AUDIT_COMMANDS_H_
